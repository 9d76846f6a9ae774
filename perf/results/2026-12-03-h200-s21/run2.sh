# Device run 2 (session 21): where an eager small call's host time goes. perf/host_profile.cc samples
# each rank's main thread every 25 us while build/nccl_timer makes 200-call eager loops of all_reduce,
# all_gather and broadcast, 8 B-4 KB, at 4 ranks under MPS; perf/host_profile.py sums the stacks that are
# inside the library. The same timing again unprofiled, with the empty-kernel loop, and stock beside it.
logs=/tmp/s21_run2
source perf/device_preamble.sh
unpack_stock
bash perf/build_timer.sh || exit 1
g++ -O2 -shared -fPIC -o build/host_profile.so perf/host_profile.cc -ldl || exit 1
mkdir -p "$logs/prof"
timer() {  # LOG LIBDIR [VAR=VALUE...]: the 4-rank timing, 200 calls a timing, five timings a size
  local log=$1 lib=$2
  shift 2
  env "$@" NCCL_TIMER_TRIALS=5 LD_LIBRARY_PATH="$lib" timeout 200 python3 -m mscclpp_nccl.run -n 4 --mps \
    --timeout 190 -- build/nccl_timer all_reduce,all_gather,broadcast,empty 8 4096 2 200 > "$logs/$log" 2>&1 ||
    echo "$log failed: $(tail -3 "$logs/$log")"
}
timer profiled.log "$PWD/mscclpp_nccl/lib" HOST_PROFILE_DIR="$logs/prof" HOST_PROFILE_US=25 \
  LD_PRELOAD="$PWD/build/host_profile.so"
timer ours.log "$PWD/mscclpp_nccl/lib"
timer stock.log "$STOCK_LIB" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8
python3 perf/host_profile.py "$logs/prof" --top 40 > "$OUT/profile.txt" 2>&1
for f in ours stock profiled; do echo "== $f"; grep '^\[0\]' "$logs/$f.log" | grep -v timeline; done > "$OUT/tables.txt"
cat "$OUT/tables.txt" | head -80
head -60 "$OUT/profile.txt"
pack_logs
