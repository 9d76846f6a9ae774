# Device run 3 (session 9): the 8-rank all-reduce and collective suites (default algorithms: large calls
# take the mapped zero-copy path, exchanges from 2 MB ranges) and forced chunked all-reduce at 8 ranks.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 320 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 \
  "tests/test_allreduce_gpu.py::test_allreduce_scenarios[8]" "tests/test_collectives_gpu.py::test_collective_scenarios[8]" \
  "tests/test_allreduce_gpu.py::test_allreduce_forced_algorithm[chunked-8]" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"
grep -E "PASSED|FAILED|ERROR|passed|failed|s call " "$OUT/tests.log" | head -20
