# Device run 1 (session 13): where eager host and GPU time goes. (1) perf/launch_cost_bench.cu alone, 4
# and 8 at once under MPS: host and drained time per launch. (2) Host time between points of one call, for
# an eager send/recv group and an all_reduce at 2 and 4 ranks, with a library built from 6b9e614 plus
# marks (build/carry/lib_phases.so.xz; the marks are not in the repository: see README). (3) The exchange
# collectives at 512 KB-16 MB, 4 and 8 ranks, with buffers mapped (default) and not (MSCCLPP_NCCL_ZERO_COPY=0).
set -u
kit=$PWD/.devkit
logs=/tmp/run1_logs && mkdir -p $logs
source "$kit/device/prepare.sh" > "$logs/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
lib=$PWD/build/lib_phases && mkdir -p $lib && xz -dc build/carry/lib_phases.so.xz > $lib/libnccl.so.2
mkdir -p mscclpp_nccl/lib && cp $lib/libnccl.so.2 mscclpp_nccl/lib/  # the launcher loads it for the unique id
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L $lib -l:libnccl.so.2 || exit 1
nvcc -O2 -o build/launch_cost_bench perf/launch_cost_bench.cu || exit 1
[ "${SKIP_LAUNCH_COST:-0}" = 1 ] || timeout 60 build/launch_cost_bench 20000 > $logs/launch_cost_1.txt 2>&1
for n in 4 8; do
  [ "${SKIP_LAUNCH_COST:-0}" = 1 ] && break
  for i in $(seq $n); do timeout 90 build/launch_cost_bench 20000 > $logs/launch_cost_${n}_$i.txt 2>&1 & done; wait
done
run() {  # log ranks timer-args... (env before the call)
  local log=$1 n=$2; shift 2
  LD_LIBRARY_PATH=$lib timeout 120 python3 -m mscclpp_nccl.run -n $n --mps --timeout 100 -- build/nccl_timer "$@" \
    > $logs/$log 2>&1 || echo "$log failed"
}
for n in 2 4; do
  for c in sendrecv all_reduce; do MSCCLPP_NCCL_HOST_PHASES=1 run phases_${c}_$n.txt $n $c 8 8192 4 200; done
done
exchanges=all_gather,reduce_scatter,alltoall,broadcast,reduce,gather,scatter
for n in 4 8; do
  run mapped_$n.txt $n $exchanges 524288 16777216 2 20
  MSCCLPP_NCCL_ZERO_COPY=0 run unmapped_$n.txt $n $exchanges 524288 16777216 2 20
done
tar -czf "$OUT/logs.tgz" -C "$logs" .
echo "== launch cost alone"; cat $logs/launch_cost_1.txt
echo "== launch cost, 4 at once (first two)"; cat $logs/launch_cost_4_1.txt $logs/launch_cost_4_2.txt | grep -v pass
echo "== launch cost, 8 at once (first)"; cat $logs/launch_cost_8_1.txt
for f in $logs/phases_*; do echo "== $(basename $f)"; grep -E "^\[0\] +[0-9]|host_phases" $f; done
for n in 4 8; do echo "== mapped / unmapped $n (bytes eager graph)"; paste <(grep -E "^\[0\] (#|  )" $logs/mapped_$n.txt) <(grep -E "^\[0\] (#|  )" $logs/unmapped_$n.txt) | awk '{print $2,$3,$4,"|",$8,$9}' | grep -v "^empty"; done
