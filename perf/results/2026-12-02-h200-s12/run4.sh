# Device run 4 (session 12): where an eager send/recv group's host time goes: perf/nccl_timer with
# NCCL_TIMER_PHASES=1 (host time of ncclGroupStart, ncclSend, ncclRecv, ncclGroupEnd) beside all_reduce
# and an empty kernel in the same launch, at 2 and 4 ranks, for the library of run 2 (build/lib_1d385d3)
# and this one (only the gather root no longer maps its source); a profile where perf exists. Then the
# zero-copy suite at 2 and 4 ranks on this library.
set -u
kit=$PWD/.devkit
logs=/tmp/run4_logs && mkdir -p $logs
source "$kit/device/prepare.sh" > "$logs/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p build && nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
t() {  # name lib ranks
  NCCL_TIMER_PHASES=1 LD_LIBRARY_PATH=$2 timeout 100 python3 -m mscclpp_nccl.run -n $3 --mps --timeout 90 -- \
    build/nccl_timer sendrecv,all_reduce,empty 8 65536 8 200 > $logs/$1_$3.txt 2>&1
}
for n in 2 4; do t before build/lib_1d385d3 $n; t after mscclpp_nccl/lib $n; done
echo "tools: $(command -v perf nsys gdb ltrace | tr '\n' ' ')"
if command -v perf > /dev/null; then
  LD_LIBRARY_PATH=mscclpp_nccl/lib timeout 100 perf record -F 20000 -g -o /tmp/perf.data -- python3 -m mscclpp_nccl.run \
    -n 2 --mps --timeout 90 -- build/nccl_timer sendrecv 8 8 2 3000 > $logs/perf_run.txt 2>&1
  perf report -i /tmp/perf.data --stdio --no-children --sort dso,sym 2> /dev/null | grep -v "^$" | head -80 > $logs/perf_report.txt
fi
timeout 300 python3 -m pytest -v -rfEs -p no:cacheprovider "tests/test_zero_copy_gpu.py::test_zero_copy_without_windows[2]" \
  "tests/test_zero_copy_gpu.py::test_zero_copy_without_windows[4]" > "$logs/tests.log" 2>&1
echo "tests rc=$?: $(grep -E ' passed| failed' "$logs/tests.log" | tail -1)"
tar -czf "$OUT/logs.tgz" -C "$logs" .
for f in $logs/before_* $logs/after_*; do echo "== $(basename $f)"; grep -E "^\[0\] (#|  )" $f | grep -v "nccl_timer:" | head -40; done
head -50 $logs/perf_report.txt 2>/dev/null
