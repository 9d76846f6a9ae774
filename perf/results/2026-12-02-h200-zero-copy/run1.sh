# Device run 1 (session 9): GPU suite part 1 (all-reduce and collectives at 2, 4 and 8 ranks, default
# and forced algorithms: the packet kernels over PacketStep and the mapped zero-copy path that large
# all-reduces now take by default), then the zero-copy-without-windows and window suites.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 200 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_zero_copy_gpu.py tests/test_windows_gpu.py \
  > "$OUT/zero_copy.log" 2>&1
echo "zero-copy + windows rc=$?: $(grep -E 'passed|failed|error' "$OUT/zero_copy.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$OUT/zero_copy.log" | head
SUITE_TIMEOUT=370 tests/gpu_suite.sh 1 "$OUT"; echo "suite 1 rc=$?"
