# Device run 6 (session 15): the side by side once more on the same library and timer as run 4, for a
# second sample of every ratio (eager figures at small sizes move by a third between runs on this
# machine), and to see whether run 4's slow first broadcast sizes at 4 ranks (ours, 7-13 us against 5.5)
# come back.
logs=/tmp/s15_run6
source perf/device_preamble.sh
side_by_side_all "2 4 8"
pack_logs
tail -32 "$OUT/side_by_side.md"
