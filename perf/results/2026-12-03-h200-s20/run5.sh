# Device run 5 (session 20): the library and table of run 4, ours against stock at 2, 4 and 8 ranks again,
# each figure the median of five timings (NCCL_TIMER_TRIALS=5) where runs 1 and 4 took three: in both,
# host stalls of about a millisecond, in ours and in stock alike, covered two of a size's three timings
# (run 4: 8-rank all_gather at 2-4 KB, 2-rank broadcast at 64 B).
logs=/tmp/s20_run5
source perf/device_preamble.sh
NCCL_TIMER_TRIALS=5 NCCL_TIMER_SHOW_TRIALS=1 side_by_side_all "2 4 8"
tail -3 "$OUT/side_by_side.md"
pack_logs
