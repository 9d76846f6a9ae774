# Device run 2 (session 13): run 1's host marks again, with the first 400 calls of each process left out
# (lazy loading and first mappings had swamped the launch's share) and a mark after the kernel launch;
# perf/launch_cost_bench.cu alone and 4 at once with a 512-thread variant; the exchange collectives at
# 2 ranks with buffers mapped and not (run 1 had 4 and 8).
set -u
kit=$PWD/.devkit
logs=/tmp/run2_logs && mkdir -p $logs
source "$kit/device/prepare.sh" > "$logs/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
lib=$PWD/build/lib_phases && mkdir -p $lib && xz -dc build/carry/lib_phases.so.xz > $lib/libnccl.so.2
mkdir -p mscclpp_nccl/lib && cp $lib/libnccl.so.2 mscclpp_nccl/lib/  # the launcher loads it for the unique id
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L $lib -l:libnccl.so.2 || exit 1
nvcc -O2 -o build/launch_cost_bench perf/launch_cost_bench.cu || exit 1
timeout 60 build/launch_cost_bench 20000 > $logs/launch_cost_1.txt 2>&1
for i in 1 2 3 4; do timeout 90 build/launch_cost_bench 20000 > $logs/launch_cost_4_$i.txt 2>&1 & done; wait
run() {  # log ranks timer-args... (env before the call)
  local log=$1 n=$2; shift 2
  LD_LIBRARY_PATH=$lib timeout 120 python3 -m mscclpp_nccl.run -n $n --mps --timeout 100 -- build/nccl_timer "$@" \
    > $logs/$log 2>&1 || echo "$log failed"
}
for n in 2 4; do
  for c in sendrecv all_reduce; do MSCCLPP_NCCL_HOST_PHASES=1 run phases_${c}_$n.txt $n $c,empty 8 8192 4 200; done
done
exchanges=all_gather,reduce_scatter,alltoall,broadcast,reduce,gather,scatter
run mapped_2.txt 2 $exchanges 524288 33554432 2 20
MSCCLPP_NCCL_ZERO_COPY=0 run unmapped_2.txt 2 $exchanges 524288 33554432 2 20
tar -czf "$OUT/logs.tgz" -C "$logs" .
echo "== launch cost alone"; cat $logs/launch_cost_1.txt
echo "== launch cost, 4 at once"; cat $logs/launch_cost_4_*.txt | grep -v pass
for f in $logs/phases_*; do echo "== $(basename $f)"; grep -E "^\[0\] +[0-9]|host_phases|^\[0\] # (empty|nccl)" $f; done
echo "== mapped / unmapped 2 (bytes eager graph)"
paste <(grep -E "^\[0\] (#|  )" $logs/mapped_2.txt) <(grep -E "^\[0\] (#|  )" $logs/unmapped_2.txt) | awk '{print $2,$3,$4,"|",$8,$9}'
