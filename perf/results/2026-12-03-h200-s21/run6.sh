# Device run 6 (session 21): the shipped table without the 8-rank alltoall's 64 KB chunks at 512 KB-1 MB
# ranges (run 5), against stock: 8-rank alltoall, 1-16 MB, each figure the median of five timings.
logs=/tmp/s21_run6
source perf/device_preamble.sh
unpack_stock
bash perf/build_timer.sh || exit 1
for lib in table stock; do
  if [ $lib = table ]; then dir=$PWD/mscclpp_nccl/lib set=(); else dir=$STOCK_LIB set=(NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=4); fi
  NCCL_TIMER_TRIALS=5 TIMER_TIMEOUT=90 bash perf/time_split.sh "$logs" $lib "$dir" 8 alltoall 1048576 16777216 "${set[@]}"
done
paste "$logs/table_alltoall_8.txt" "$logs/stock_alltoall_8.txt" | grep -v '^#' |
  awk '{printf "%10s ours %7.2f / %7.2f  stock %7.2f / %7.2f  ratio %.2fx / %.2fx\n", $1, $2, $3, $6, $7, $6/$2, $7/$3}' |
  tee "$OUT/alltoall_8.txt"
pack_logs
