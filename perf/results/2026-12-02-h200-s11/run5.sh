# Device run 5 (session 11): what users run, on run 4's library: the PyTorch applications (FSDP2, DDP,
# tensor and pipeline parallelism at 2, 4 and 8 ranks, each against a single-device reference) and a
# peer's death followed by destroy_process_group.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 400 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 tests/test_apps_gpu.py::test_app \
  tests/test_apps_gpu.py::test_peer_death_then_destroy_process_group > /tmp/apps.log 2>&1
echo "apps rc=$?: $(grep -E ' passed| failed' /tmp/apps.log | tail -1)"
grep -E "^(FAILED|ERROR)" /tmp/apps.log | head
grep -E "^[0-9.]+s call" /tmp/apps.log | head -20
gzip -c /tmp/apps.log > "$OUT/apps.log.gz"
