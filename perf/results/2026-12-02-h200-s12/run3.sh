# Device run 3 (session 12): the PyTorch applications (FSDP2, DDP, tensor and pipeline parallelism) at
# 2, 4 and 8 ranks against a single-device reference, and peer death then destroy_process_group, on
# run 2's library (FSDP2's all-gathers of caching-allocator memory take the zero-copy push).
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
# A second sample of the 4-rank side by side (the eager geometric mean moves about 5% between runs).
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150
bash perf/side_by_side.sh /tmp/timer4 /tmp/stock/nccl-2.30.7-sm90/lib "4" all_reduce all_gather reduce_scatter \
  alltoall broadcast reduce gather scatter sendrecv > /tmp/sbs4.log 2>&1
python3 perf/side_by_side.py /tmp/timer4 > "$OUT/side_by_side_4.md" 2>&1
tar -czf "$OUT/timer4.tgz" -C /tmp timer4
tail -12 "$OUT/side_by_side_4.md"
