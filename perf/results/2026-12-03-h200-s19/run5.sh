# Device run 5 (session 19, the last device seconds): the 8-rank reduce at 128-512 KB by the table
# (two-shot packets from 256 KB) against the one-shot packet exchange forced on 16 blocks.
logs=/tmp/s19_run5
source perf/device_preamble.sh
lib=$PWD/mscclpp_nccl/lib C=$logs/C && mkdir -p "$C"
TIMER_TIMEOUT=25 bash perf/time_split.sh "$C" table "$lib" 8 reduce 131072 524288
TIMER_TIMEOUT=25 bash perf/time_split.sh "$C" exchange_packet_16 "$lib" 8 reduce 131072 524288 \
  MSCCLPP_NCCL_ALGO=reduce=exchange_packet/16
for f in "$C"/*_8.txt; do
  printf "%-28s %s\n" "$(basename "$f" .txt)" "$(awk '!/^#/ {printf "%dK:%s/%s ", $1 / 1024, $3, $2}' "$f")"
done | tee "$OUT/reduce_8.txt"
