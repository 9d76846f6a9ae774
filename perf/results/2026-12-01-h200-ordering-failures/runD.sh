# Device run D: on a fresh machine (no killed clients before), the GPU tests most exposed to the group
# and ordering changes: ranks in one process (groups over several communicators), all-reduce scenarios.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=20
timeout 300 python3 -m pytest -q -rfEs -p no:cacheprovider --durations=0 tests/test_one_process_gpu.py tests/test_allreduce_gpu.py::test_allreduce_scenarios "tests/test_cupy_client.py::test_cupy_client[4]" "tests/test_windows_gpu.py::test_windows[4]" > "$OUT/suite.log" 2>&1
echo "suite rc=$?"
grep -E "passed|failed|^FAILED|^ERROR|s call" "$OUT/suite.log" | tail -20
