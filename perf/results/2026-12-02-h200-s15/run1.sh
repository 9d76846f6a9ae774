# Device run 1 (session 15): the library as session 14 left it (never run on a GPU since session 13's
# run 6). Ordering across streams at 2, 4 and 8 ranks; the two experiments session 14 wrote
# (perf/experiments/exchange_latency, perf/experiments/table_8_ranks); then the side by side at 2, 4 and 8
# ranks with the timer's new barrier before every timing.
logs=/tmp/s15_run1
source perf/device_preamble.sh
check_stream_order "2 4 8"
SECONDS=0
bash perf/experiments/exchange_latency/run.sh "$logs/el" > "$logs/el.log" 2>&1
echo "exchange_latency rc=$? ${SECONDS}s"; cp "$logs/el.log" "$OUT/exchange_latency.txt"
SECONDS=0
bash perf/experiments/table_8_ranks/run.sh "$logs/t8" > "$logs/t8.log" 2>&1
echo "table_8_ranks rc=$? ${SECONDS}s"; cp "$logs/t8.log" "$OUT/table_8_ranks.txt"
side_by_side_all "2 4 8"
pack_logs
tail -c 3000 "$OUT/exchange_latency.txt"; tail -c 2500 "$OUT/table_8_ranks.txt"
