# Device run 5 (session 12): the send/recv group's bookkeeping without allocations (thread-kept lists,
# one pass without a map where no peer and direction repeat, no initialisation pass when none is queued).
# Expected: ncclGroupEnd about 0.5 us less host time. perf/nccl_timer with NCCL_TIMER_PHASES=1 for the
# group code of run 4 (build/lib_1d385d3, the same shim as 7709c8d) and this one, alternated twice, at 2
# and 4 ranks; then the collective scenarios at 2 and 4, send/recv over lanes and with 10 ranks.
set -u
kit=$PWD/.devkit
logs=/tmp/run5_logs && mkdir -p $logs
source "$kit/device/prepare.sh" > "$logs/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p build && nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
t() {  # name lib ranks
  NCCL_TIMER_PHASES=1 LD_LIBRARY_PATH=$2 timeout 100 python3 -m mscclpp_nccl.run -n $3 --mps --timeout 90 -- \
    build/nccl_timer sendrecv,all_reduce 8 65536 8 200 > $logs/$1_$3.txt 2>&1
}
for n in 2 4; do for k in 1 2; do t before$k build/lib_1d385d3 $n; t after$k mscclpp_nccl/lib $n; done; done
timeout 240 python3 -m pytest -v -rfEs -p no:cacheprovider "tests/test_collectives_gpu.py::test_collective_scenarios[2]" \
  "tests/test_collectives_gpu.py::test_collective_scenarios[4]" tests/test_collectives_gpu.py::test_p2p_chunked_forced \
  tests/test_collectives_gpu.py::test_p2p_many_peers > "$logs/tests.log" 2>&1
echo "tests rc=$?: $(grep -E ' passed| failed' "$logs/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$logs/tests.log" | head
tar -czf "$OUT/logs.tgz" -C "$logs" .
for f in $logs/before* $logs/after*; do echo "== $(basename $f): $(grep -h '# phases' $f | sed 's/.*group end //' | tr '\n' ' ')"; done
