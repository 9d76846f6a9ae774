# Device run 4 (session 12): where an eager send/recv group's host time goes. perf/nccl_timer with
# NCCL_TIMER_PHASES=1 (host time of ncclGroupStart, ncclSend, ncclRecv, ncclGroupEnd), against all_reduce
# and an empty kernel in the same launch, ours and stock, at 2 and 4 ranks; a profile where perf exists.
set -u
kit=$PWD/.devkit
logs=/tmp/run4_logs && mkdir -p $logs
source "$kit/device/prepare.sh" > "$logs/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json NCCL_TIMER_PHASES=1
mkdir -p build /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
stock=/tmp/stock/nccl-2.30.7-sm90/lib
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
t() {  # name lib ranks [env...]
  local name=$1 lib=$2 n=$3; shift 3
  env "$@" LD_LIBRARY_PATH=$lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- \
    build/nccl_timer sendrecv,all_reduce,empty 8 65536 8 200 > $logs/${name}_$n.txt 2>&1
}
for n in 2 4; do
  t ours mscclpp_nccl/lib $n
  t stock $stock $n NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MAX_CTAS=$((32 / n))
done
echo "tools: $(command -v perf nsys gdb ltrace | tr '\n' ' ')"
if command -v perf > /dev/null; then
  LD_LIBRARY_PATH=mscclpp_nccl/lib timeout 100 perf record -F 20000 -g -o /tmp/perf.data -- python3 -m mscclpp_nccl.run \
    -n 2 --mps --timeout 90 -- build/nccl_timer sendrecv 8 8 2 3000 > $logs/perf_run.txt 2>&1
  perf report -i /tmp/perf.data --stdio --no-children --sort dso,sym 2> /dev/null | grep -v "^$" | head -80 > $logs/perf_report.txt
fi
tar -czf "$OUT/logs.tgz" -C "$logs" .
for f in $logs/ours_* $logs/stock_*; do echo "== $(basename $f)"; grep -E "^\[0\] (#|  )" $f | grep -v "nccl_timer:" | head -40; done
head -50 $logs/perf_report.txt 2>/dev/null
