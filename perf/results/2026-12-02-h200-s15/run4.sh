# Device run 4 (session 15): the side by side again, now that perf/nccl_timer reports the median of three
# timings (run 3's eager figures had single spikes: scatter 32 KB at 8 ranks 20.0 us between 9.0 and 10.3).
# Then chunked grids for reduce and broadcast at 8 ranks, 128 KB-1 MB, against the table (reduce 256 KB is
# the last 8-rank size under 1.1x stock).
logs=/tmp/s15_run4
source perf/device_preamble.sh
side_by_side_all "2 4 8"
SECONDS=0
grid() {  # LABEL BLOCKS/THREADS/CHUNK
  TIMER_TIMEOUT=120 bash perf/time_split.sh "$logs/grids" "$1" "$PWD/mscclpp_nccl/lib" 8 reduce,broadcast \
    131072 1048576 ${2:+MSCCLPP_NCCL_ALGO=reduce=exchange_chunked/$2,broadcast=exchange_chunked/$2}
}
mkdir -p "$logs/grids"
grid table
grid c16x8k 16/512/8192
grid c8x32k 8/512/32768
grid c16t1024 16/1024/16384
grid c4x64k 4/512/65536
python3 perf/compare_configs.py "$logs/grids" > "$OUT/grids_8_ranks.txt" 2>&1
echo "grids: ${SECONDS}s"
pack_logs
cat "$OUT/grids_8_ranks.txt"; tail -32 "$OUT/side_by_side.md"
