# Device run 5 (session 16): reduce on the two-shot packet schedule (reduce_two_shot_packet; the shipped
# table takes it at 8 ranks between 128 KB and 512 KB), the two-shot all-reduce kernel split by template,
# and non-roots' receive buffers checked untouched. The ordering check at 4 and 8 ranks; the collective scenarios; reduce
# forced onto the new algorithm at 2, 3 and 8 ranks and in small chunks at 3; the all-reduce scenarios at
# 4 ranks; then the side by side at 2, 4 and 8 ranks, a second sample beside run 4's.
logs=/tmp/s16_run5
source perf/device_preamble.sh
check_stream_order "4 8"
run_tests collectives 200 tests/test_collectives_gpu.py::test_collective_scenarios \
  "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot-2]" \
  "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot-3]" \
  "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot-8]" \
  "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot_small_chunks-3]" \
  "tests/test_allreduce_gpu.py::test_allreduce_scenarios[4]"
cp "$logs/collectives.log" "$OUT/"
side_by_side_all "2 4 8"
pack_logs
tail -32 "$OUT/side_by_side.md"
