# Device run 3 (session 17): the final library of the session. The ordering check at 2, 4 and 8 ranks, the
# GPU suites, reduce forced onto the two-shot schedule at 4 ranks and in small chunks at 5, the PyTorch
# applications; then the side by side at 2, 4 and 8 ranks, and again at 4.
logs=/tmp/s17_run3
source perf/device_preamble.sh
check_stream_order "2 4 8"
gpu_suites
run_tests forced 200 "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot-4]" \
  "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot_small_chunks-5]"
pytorch_apps
side_by_side_all "2 4 8"
# A second 4-rank sample, for the eager geometric mean that moved 1.85x-1.94x between session 16's runs.
MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150 bash perf/side_by_side.sh "$logs/timer_4b" "$STOCK_LIB" 4 \
  all_reduce all_gather reduce_scatter alltoall broadcast reduce gather scatter sendrecv
python3 perf/side_by_side.py "$logs/timer_4b" > "$OUT/side_by_side_4b.md" 2>&1
pack_logs
tail -32 "$OUT/side_by_side.md"
tail -2 "$OUT/side_by_side_4b.md"
