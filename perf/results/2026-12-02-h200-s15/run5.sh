# Device run 5 (session 15): why did stock's eager times at 4 ranks fall by a third once perf/nccl_timer
# took the median of three timings (run 4 against run 3)? Each of five eager timings per size, in order,
# ours and stock, 4 ranks, four collectives, 8 B-64 KB.
logs=/tmp/s15_run5
source perf/device_preamble.sh
unpack_stock
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
for lib in ours stock; do
  dir=$PWD/mscclpp_nccl/lib settings=()
  [ $lib = stock ] && dir=$STOCK_LIB settings=(NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MAX_CTAS=8)
  env "${settings[@]}" NCCL_TIMER_TRIALS=5 NCCL_TIMER_SHOW_TRIALS=1 LD_LIBRARY_PATH=$dir timeout 120 python3 -m mscclpp_nccl.run \
    -n 4 --mps --timeout 110 -- build/nccl_timer broadcast,reduce,all_reduce,gather 8 65536 4 > "$logs/$lib.log" 2>&1
  echo "$lib rc=$?"
  grep '^\[0\] # trials' "$logs/$lib.log" | sed 's/^\[0\] # trials //' > "$OUT/trials_$lib.txt"
done
pack_logs
cat "$OUT/trials_stock.txt"
