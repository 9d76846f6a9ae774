# Device run 3 (session 16): run 2 found the lean all_gather body as fast inside the library's kernel as
# alone, so the cost is in reading the peer sets at run time. The exchange with its peer sets fixed at
# compile time per collective and role (baseline) against session 15's kernel (runtime_peer_sets), with
# the lean yardsticks; the ordering check; the GPU suites.
logs=/tmp/s16_run3
source perf/device_preamble.sh
SECONDS=0
bash perf/experiments/exchange_latency/run.sh "$logs/el" runtime_peer_sets > "$logs/el.log" 2>&1
echo "exchange_latency rc=$? ${SECONDS}s"; cp "$logs/el.log" "$OUT/exchange_latency.txt"
check_stream_order "2 4 8"
gpu_suites
pack_logs
cat "$OUT/exchange_latency.txt" | tail -45
