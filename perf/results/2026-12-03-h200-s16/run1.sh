# Device run 1 (session 16): the exchange's loops word by word, every peer in turn, in rank order (as the
# one-shot all-reduce and session 15's all_gather_lean; native/algorithms/exchange_packet.cu). The
# exchange-latency bench, new kernel (baseline) against the old peer-by-peer loops (peer_major), with the
# lean yardsticks beside both; the ordering check; the side by side at 2, 4 and 8 ranks.
logs=/tmp/s16_run1
source perf/device_preamble.sh
SECONDS=0
bash perf/experiments/exchange_latency/run.sh "$logs/el" peer_major > "$logs/el.log" 2>&1
echo "exchange_latency rc=$? ${SECONDS}s"; cp "$logs/el.log" "$OUT/exchange_latency.txt"
check_stream_order "2 4 8"
side_by_side_all "2 4 8"
pack_logs
cat "$OUT/exchange_latency.txt" | tail -45
tail -32 "$OUT/side_by_side.md"
