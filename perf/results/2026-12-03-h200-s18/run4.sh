# Device run 4 (session 18): a second 4-rank side by side of run 3's library, and the 8-rank reduce at
# 128 KB-1 MB (its one point under 1.1x, 256 KB eager) by the table (two-shot packets on 8-16 blocks
# there) against the two-shot schedule forced on 4, 16 and 32 blocks and in 2 KB chunks.
logs=/tmp/s18_run4
source perf/device_preamble.sh
started=$SECONDS
unpack_stock
MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150 bash perf/side_by_side.sh "$logs/timer" "$STOCK_LIB" 4 \
  all_reduce all_gather reduce_scatter alltoall broadcast reduce gather scatter sendrecv
python3 perf/side_by_side.py "$logs/timer" > "$OUT/side_by_side_4b.md" 2>&1
echo "side by side: $((SECONDS - started))s"
lib=$PWD/mscclpp_nccl/lib C=$logs/C && mkdir -p $C
bash perf/time_split.sh $C table $lib 8 reduce 131072 1048576
for cfg in reduce_two_shot_packet/4 reduce_two_shot_packet/16 reduce_two_shot_packet/32 \
  reduce_two_shot_packet/0/0/2048; do
  bash perf/time_split.sh $C ${cfg//\//_} $lib 8 reduce 131072 1048576 MSCCLPP_NCCL_ALGO=reduce=$cfg
done
for f in $C/*_8.txt; do
  printf "%-44s %s\n" "$(basename $f .txt)" \
    "$(awk '!/^#/ {s = $1 >= 1048576 ? ($1/1048576) "M" : ($1/1024) "K"; printf "%s:%s/%s ", s, $3, $2}' $f)"
done | tee "$OUT/reduce_8.txt"
echo "run 4: $((SECONDS - started))s"
tail -12 "$OUT/side_by_side_4b.md"
pack_logs
