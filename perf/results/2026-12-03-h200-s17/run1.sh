# Device run 1 (session 17): where rank 0's eager time goes beyond its host time, then the GPU tests that
# session 16 left unrun on its final library (8841654).
# (1) perf/nccl_timer with NCCL_TIMER_TIMELINE=1 at 4 ranks, ours and stock, all_reduce, reduce and
#     sendrecv at 8 B-32 KB (factor 4), 20 calls a timing as nccl-tests, and ours again at 200 calls.
# (2) The ordering check at 2, 4 and 8 ranks; the GPU suites; reduce forced onto the two-shot schedule at
#     4 ranks and in small chunks at 5; the PyTorch applications.
logs=/tmp/s17_run1
source perf/device_preamble.sh
unpack_stock
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
timeline() {  # NAME LIBDIR ITERS [VAR=VALUE...]
  local name=$1 lib=$2 iters=$3
  shift 3
  env "$@" NCCL_TIMER_TIMELINE=1 LD_LIBRARY_PATH="$lib" timeout 120 python3 -m mscclpp_nccl.run -n 4 --mps \
    --timeout 110 -- build/nccl_timer all_reduce,reduce,sendrecv 8 32768 4 "$iters" > "$logs/$name.log" 2>&1 ||
    echo "timeline $name failed"
}
started=$SECONDS
timeline ours_20 "$PWD/mscclpp_nccl/lib" 20
timeline stock_20 "$STOCK_LIB" 20 NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MAX_CTAS=8
timeline ours_200 "$PWD/mscclpp_nccl/lib" 200
timeline ours_20b "$PWD/mscclpp_nccl/lib" 20
echo "timelines: $((SECONDS - started))s"
python3 perf/timeline_summary.py "$logs"/ours_20.log "$logs"/stock_20.log "$logs"/ours_200.log \
  "$logs"/ours_20b.log > "$OUT/timeline.md" 2>&1
check_stream_order "2 4 8"
gpu_suites
run_tests forced 200 "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot-4]" \
  "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot_small_chunks-5]"
pytorch_apps
pack_logs
cat "$OUT/timeline.md"
