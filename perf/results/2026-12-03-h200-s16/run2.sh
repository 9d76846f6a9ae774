# Device run 2 (session 16): run 1 found the word-by-word loops slower than the peer-by-peer ones they
# replaced, on the same schedule as the lean all_gather that beats both. Is it the body or what wraps it?
# The lean body inside the library's kernel, for all_gather alone (lean_all_gather), against the kernel as
# it is (baseline).
logs=/tmp/s16_run2
source perf/device_preamble.sh
SECONDS=0
bash perf/experiments/exchange_latency/run.sh "$logs/el" lean_all_gather > "$logs/el.log" 2>&1
echo "exchange_latency rc=$? ${SECONDS}s"; cp "$logs/el.log" "$OUT/exchange_latency.txt"
pack_logs
grep -E "ranks|all_gather|broadcast" "$OUT/exchange_latency.txt"
