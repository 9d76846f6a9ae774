# Device run 5 (session 18): the final table (8-rank reduce on the two-shot schedule to 1 MB): that
# schedule forced at 8 ranks through the collective scenarios, then ours against stock at 4 and 8 ranks,
# and 4 ranks once more.
logs=/tmp/s18_run5
source perf/device_preamble.sh
run_tests forced 200 "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot-8]"
side_by_side_all "4 8"
unpack_stock
MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150 bash perf/side_by_side.sh "$logs/timer_4c" "$STOCK_LIB" 4 \
  all_reduce all_gather reduce_scatter alltoall broadcast reduce gather scatter sendrecv
python3 perf/side_by_side.py "$logs/timer_4c" > "$OUT/side_by_side_4c.md" 2>&1
tail -12 "$OUT/side_by_side.md"
tail -1 "$OUT/side_by_side_4c.md"
pack_logs
