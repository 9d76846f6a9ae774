# Device run 4 (session 13): the PyTorch applications (FSDP2, DDP, tensor and pipeline parallelism) at
# 2, 4 and 8 ranks against a single-device reference, and peer death then destroy_process_group, on run
# 3's library; then a second sample of the 4-rank side by side, and the eager loop's length: all_reduce
# and an empty kernel at 4 ranks timed over 20 and over 200 back-to-back calls (does the eager time
# above the host's shrink with more calls, as a fixed cost at the loop's ends would?).
logs=/tmp/s13_run4
source perf/device_preamble.sh
# The library travels compressed (with run 5's beside it the carry limit is otherwise exceeded).
mkdir -p mscclpp_nccl/lib && xz -dc build/carry/lib_main.so.xz > mscclpp_nccl/lib/libnccl.so.2
ln -sf libnccl.so.2 mscclpp_nccl/lib/libnccl.so
timeout 400 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 tests/test_apps_gpu.py::test_app \
  tests/test_apps_gpu.py::test_peer_death_then_destroy_process_group > "$logs/apps.log" 2>&1
echo "apps rc=$?: $(grep -E ' passed| failed' "$logs/apps.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$logs/apps.log" | head
unpack_stock
export MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150
bash perf/side_by_side.sh "$logs/timer4" "$STOCK_LIB" "4" all_reduce all_gather reduce_scatter alltoall broadcast \
  reduce gather scatter sendrecv > "$logs/sbs4.log" 2>&1
python3 perf/side_by_side.py "$logs/timer4" > "$OUT/side_by_side_4.md" 2>&1
loop() {  # label libdir iters [env...]
  local label=$1 lib=$2 iters=$3
  shift 3
  env "$@" LD_LIBRARY_PATH=$lib timeout 120 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 100 -- \
    build/nccl_timer all_reduce,empty 8 1024 4 $iters > "$logs/loop_${label}_$iters.txt" 2>&1
  echo "== $label, $iters calls a size (bytes eager graph host)"; grep -E "^\[0\] (#|  )" "$logs/loop_${label}_$iters.txt"
}
for iters in 20 200; do
  loop ours "$PWD/mscclpp_nccl/lib" $iters
  loop stock "$STOCK_LIB" $iters NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MAX_CTAS=8
done
pack_logs
tail -12 "$OUT/side_by_side_4.md"
