# Device run 3 (session 20): the ticket_publish experiment (packet bench, three builds), then the library of
# e9ddd34 at 8 ranks with the shipped table of this commit (all_reduce one-shot to 64 KB, reduce's packet
# exchange to 256 KB), reduce and all_reduce 16 KB-1 MB.
logs=/tmp/s20_run3
source perf/device_preamble.sh
started=$SECONDS
bash perf/experiments/ticket_publish/run.sh "$logs/ticket_publish" > "$OUT/ticket_publish.md" 2>&1
rm -f "$logs"/ticket_publish/bench_*  # binaries stay out of the logs
echo "bench: $((SECONDS - started))s"
bash perf/build_timer.sh
bash perf/time_split.sh "$logs" table "$PWD/mscclpp_nccl/lib" 8 reduce,all_reduce 16384 1048576
for f in "$logs"/table_*_8.txt; do
  echo "$(basename "$f" .txt): $(awk '!/^#/ {printf "%dK:%s/%s ", $1 / 1024, $3, $2}' "$f")"
done | tee "$OUT/table_8.txt"
echo "run 3: $((SECONDS - started))s"
pack_logs
grep -E "failed|^\| 8 \| mid|^\| [248] \| small \| (all_reduce|reduce|broadcast) " "$OUT/ticket_publish.md" | head -60
