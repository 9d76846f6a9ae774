# Device run 7 (session 21): the library of runs 3-6 with the shipped table of run 6 (8-rank alltoall on
# the chunked exchange's default chunk), ours against stock at 2, 4 and 8 ranks, each figure the median
# of five timings: the closing check of every target.
logs=/tmp/s21_run7
source perf/device_preamble.sh
started=$SECONDS
NCCL_TIMER_TRIALS=5 NCCL_TIMER_SHOW_TRIALS=1 side_by_side_all "2 4 8"
tail -3 "$OUT/side_by_side.md"
echo "run 7: $((SECONDS - started))s"
pack_logs
