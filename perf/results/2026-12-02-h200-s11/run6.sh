# Device run 6 (session 11): part of GPU suite part 2 on run 4's library, as far as the device time left
# allows: the CuPy and torch.distributed clients, ranks in one process, the tuning table's use.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 270 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 tests/test_cupy_client.py \
  tests/test_torch_client.py tests/test_one_process_gpu.py tests/test_tuning_gpu.py > /tmp/suite2.log 2>&1
echo "suite rc=$?: $(grep -E ' passed| failed' /tmp/suite2.log | tail -1)"
grep -E "^(FAILED|ERROR)|PASSED|SKIPPED" /tmp/suite2.log | head -40
gzip -c /tmp/suite2.log > "$OUT/suite2.log.gz"
