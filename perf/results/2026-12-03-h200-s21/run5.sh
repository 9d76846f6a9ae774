# Device run 5 (session 21): 8-rank alltoall at 1-8 MB, where the shipped table's chunked exchange (on
# 64 KB chunks, as this run found) was 1.10-1.12x stock in graphs at 4 MB (runs 3-4) and took 76 us at
# 4 MB against 96 at 8 MB. Forced grids and chunks of the chunked exchange (and the packet exchange), the table, and stock,
# side by side; perf/compare_configs.py lists where a forced one beats the table.
logs=/tmp/s21_run5
source perf/device_preamble.sh
unpack_stock
bash perf/build_timer.sh || exit 1
sweep=$logs/sweep
mkdir -p "$sweep"
for config in table b16 b32 b64 b16c64k b32c64k b64c32k packet; do
  case $config in
    table) force=() ;;
    packet) force=(MSCCLPP_NCCL_ALGO=alltoall=exchange_packet) ;;
    *) blocks=${config#b} blocks=${blocks%c*} chunk=0
       [[ $config == *c* ]] && chunk=${config#*c} && chunk=$((${chunk%k} * 1024))
       force=(MSCCLPP_NCCL_ALGO=alltoall=exchange_chunked/$blocks/0/$chunk) ;;
  esac
  TIMER_TIMEOUT=90 bash perf/time_split.sh "$sweep" "$config" "$PWD/mscclpp_nccl/lib" 8 alltoall 1048576 8388608 "${force[@]}"
done
TIMER_TIMEOUT=90 bash perf/time_split.sh "$sweep" stock "$STOCK_LIB" 8 alltoall 1048576 8388608 \
  NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=4
for f in "$sweep"/*_alltoall_8.txt; do echo "== $(basename "$f")"; grep -v '^#' "$f"; done | tee "$OUT/sweep.txt"
python3 perf/compare_configs.py "$sweep" 0.03 | tee "$OUT/compare.txt"
grep -h "ignoring\|forced" "$sweep"/*_all_8.log | sort | uniq -c | head
pack_logs
