# Device run 6 (session 13): the final library, where a grid that is not launched early still carries
# the early-launch attribute after a kernel that does not let it start early (launch_record.cc keeps,
# per stream and capture, whether the last kernel did). Ordering across streams at 2, 4 and 8 ranks; the
# GPU suites (zero-copy, collectives, send/recv, all-reduce); a subset of the PyTorch applications (run
# 4's logs were overwritten by run 5's); then the side by side at 2, 4 and 8 ranks.
logs=/tmp/s13_run6
source perf/device_preamble.sh
check_stream_order "2 4 8"
gpu_suites
timeout 200 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 "tests/test_apps_gpu.py::test_app[fsdp2-2]" \
  "tests/test_apps_gpu.py::test_app[fsdp2-4]" "tests/test_apps_gpu.py::test_app[ddp-4]" \
  "tests/test_apps_gpu.py::test_app[tp-8]" "tests/test_apps_gpu.py::test_app[pipeline-8]" \
  "tests/test_apps_gpu.py::test_peer_death_then_destroy_process_group[0-4]" > "$logs/apps.log" 2>&1
echo "apps rc=$?: $(grep -E ' passed| failed' "$logs/apps.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$logs/apps.log" | head
unpack_stock
export MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150
SECONDS=0
bash perf/side_by_side.sh "$logs/timer" "$STOCK_LIB" "2 4 8" all_reduce all_gather reduce_scatter alltoall broadcast \
  reduce gather scatter sendrecv
echo "side by side: ${SECONDS}s"
python3 perf/side_by_side.py "$logs/timer" > "$OUT/side_by_side.md" 2>&1
pack_logs
cat "$OUT/side_by_side.md"
