# Device run 6 (session 10): the shipped table of d59e141 (8 blocks for 4-16 KB at 4 ranks, two-shot
# packets to 1 MB at 2 ranks, the 8-rank exchange entries) under the all-reduce and collective suites.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 200 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 \
  "tests/test_allreduce_gpu.py::test_allreduce_scenarios[2]" "tests/test_allreduce_gpu.py::test_allreduce_scenarios[4]" \
  "tests/test_collectives_gpu.py::test_collective_scenarios[8]" > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(grep -E ' passed| failed' "$OUT/tests.log" | tail -1)"
grep -E "PASSED|FAILED|ERROR" "$OUT/tests.log" | head
