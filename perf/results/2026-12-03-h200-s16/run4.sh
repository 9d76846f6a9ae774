# Device run 4 (session 16): run 3's bench comparison again (its baseline build lacked registry.cc and
# did not link), on the same library: compile-time peer sets (baseline) against session 15's kernel
# (runtime_peer_sets). Then the side by side at 2, 4 and 8 ranks and the PyTorch applications.
logs=/tmp/s16_run4
source perf/device_preamble.sh
SECONDS=0
bash perf/experiments/exchange_latency/run.sh "$logs/el" runtime_peer_sets > "$logs/el.log" 2>&1
echo "exchange_latency rc=$? ${SECONDS}s"; cp "$logs/el.log" "$OUT/exchange_latency.txt"
side_by_side_all "2 4 8"
pytorch_apps
pack_logs
grep -v "^| empty\|lean_args" "$OUT/exchange_latency.txt" | tail -40
tail -32 "$OUT/side_by_side.md"
