# Device run 3 (session 10): the spread zero-copy reduce (every rank reduces a segment into the root's
# destination). The zero-copy suite at 2, 4 and 8 ranks and the collective suites at 2 and 8, then
# perf/side_by_side.sh at 2, 4 and 8 ranks: the nine benchmarks, ours against stock NCCL 2.30.7.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 300 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 tests/test_zero_copy_gpu.py \
  "tests/test_collectives_gpu.py::test_collective_scenarios[2]" "tests/test_collectives_gpu.py::test_collective_scenarios[8]" \
  "tests/test_allreduce_gpu.py::test_allreduce_scenarios[2]" > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(grep -E ' passed| failed' "$OUT/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150
SECONDS=0
bash perf/side_by_side.sh "$OUT/timer" /tmp/stock/nccl-2.30.7-sm90/lib "2 4 8" all_reduce all_gather reduce_scatter \
  alltoall broadcast reduce gather scatter sendrecv
echo "side by side: ${SECONDS}s"
python3 perf/side_by_side.py "$OUT/timer" > "$OUT/side_by_side.md" 2>&1
cat "$OUT/side_by_side.md"
