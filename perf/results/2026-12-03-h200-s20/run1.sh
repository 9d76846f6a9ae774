# Device run 1 (session 20), library of e9ddd34: the two_shot_8_ranks experiment, then ours against stock at
# 2, 4 and 8 ranks with every eager trial printed and each rank's timeline (began, returned, drained), to see
# whether session 19's 8-rank eager host stall (all_reduce 128 B: 27 us of host time a call) recurs, and on
# which rank.
bash perf/experiments/two_shot_8_ranks/run.sh
logs=/tmp/s20_run1
source perf/device_preamble.sh
NCCL_TIMER_SHOW_TRIALS=1 NCCL_TIMER_TIMELINE=1 side_by_side_all "2 4 8"
tail -4 "$OUT/side_by_side.md"
pack_logs
