# Device run 4 (session 21): the library of run 3. Ours against stock at 2, 4 and 8 ranks again, each
# figure the median of five timings; then run 2's 4-rank timing of small eager calls unprofiled (host time
# a call, ours, stock and the empty-kernel loop), for the launch through the driver.
logs=/tmp/s21_run4
source perf/device_preamble.sh
started=$SECONDS
NCCL_TIMER_TRIALS=5 NCCL_TIMER_SHOW_TRIALS=1 side_by_side_all "2 4 8"
tail -3 "$OUT/side_by_side.md"
timer() {  # LOG LIBDIR [VAR=VALUE...]: as run2.sh
  local log=$1 lib=$2
  shift 2
  env "$@" NCCL_TIMER_TRIALS=5 LD_LIBRARY_PATH="$lib" timeout 200 python3 -m mscclpp_nccl.run -n 4 --mps \
    --timeout 190 -- build/nccl_timer all_reduce,all_gather,broadcast,empty 8 4096 2 200 > "$logs/$log" 2>&1 ||
    echo "$log failed: $(tail -3 "$logs/$log")"
}
timer ours.log "$PWD/mscclpp_nccl/lib"
timer stock.log "$STOCK_LIB" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8
for f in ours stock; do echo "== $f"; grep '^\[0\]' "$logs/$f.log"; done > "$OUT/small_eager.txt"
cat "$OUT/small_eager.txt"
echo "run 4: $((SECONDS - started))s"
pack_logs
