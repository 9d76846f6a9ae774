# Device run 2 (session 10): the reduce-loop microbenchmark again (alignment known at compile time or
# not), the zero-copy suite and the 4-rank collective suites on the new reduce loop (2 units x 8 ranks of
# loads in flight, a 16-byte fast path), then perf/side_by_side.sh at 4 ranks: the nine benchmarks, ours
# against stock NCCL 2.30.7, 8 B-256 MB, eager and graph.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 60 build/reduce_loop_bench 32 > "$OUT/bench.txt" 2>&1; echo "bench rc=$?"
timeout 230 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 tests/test_zero_copy_gpu.py \
  "tests/test_allreduce_gpu.py::test_allreduce_scenarios[4]" "tests/test_collectives_gpu.py::test_collective_scenarios[4]" \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(grep -E ' passed| failed' "$OUT/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=130
SECONDS=0
bash perf/side_by_side.sh "$OUT/timer" /tmp/stock/nccl-2.30.7-sm90/lib 4 all_reduce all_gather reduce_scatter \
  alltoall broadcast reduce gather scatter sendrecv
echo "side by side: ${SECONDS}s"
python3 perf/side_by_side.py "$OUT/timer" > "$OUT/side_by_side.md" 2>&1
cat "$OUT/bench.txt" "$OUT/side_by_side.md"
