# Device run 2 (session 15): the send loop that loads each word once (native/algorithms/exchange_packet.cu)
# and the 8-rank table rules. The exchange-latency bench, new kernel (baseline) against the old send loop
# (send_per_peer) and the two patches left on top of it; the ordering check; the GPU suites.
logs=/tmp/s15_run2
source perf/device_preamble.sh
SECONDS=0
bash perf/experiments/exchange_latency/run.sh "$logs/el" send_per_peer receive_any_order self_copy_last \
  > "$logs/el.log" 2>&1
echo "exchange_latency rc=$? ${SECONDS}s"; cp "$logs/el.log" "$OUT/exchange_latency.txt"
check_stream_order "2 4 8"
gpu_suites
pack_logs
cat "$OUT/exchange_latency.txt"
