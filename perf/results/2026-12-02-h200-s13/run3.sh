# Device run 3 (session 13): the session's library. Exchanges map their buffers only from 16 MB of
# traffic over all ranks; a send/recv group allocates nothing in runSendRecv and launches no empty
# chunked kernel; the zero-copy exchange writes where exchange.h says peers write. Ordering across
# streams at 2, 4 and 8 ranks; the zero-copy suite at 2, 4 and 8 and switched off; the collective,
# send/recv and all-reduce suites; then perf/side_by_side.sh at 2, 4 and 8 ranks.
logs=/tmp/s13_run3
source perf/device_preamble.sh
check_stream_order "2 4 8"
gpu_suites
unpack_stock
export MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150
SECONDS=0
bash perf/side_by_side.sh "$logs/timer" "$STOCK_LIB" "2 4 8" all_reduce all_gather reduce_scatter alltoall broadcast \
  reduce gather scatter sendrecv
echo "side by side: ${SECONDS}s"
python3 perf/side_by_side.py "$logs/timer" > "$OUT/side_by_side.md" 2>&1
pack_logs
cat "$OUT/side_by_side.md"
