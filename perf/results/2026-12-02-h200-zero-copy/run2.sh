# Device run 2 (session 9): the zero-copy-without-windows and window suites, the default all-reduce suite,
# then perf/nccl_timer (nccl-tests timing, eager and CUDA graph, the same buffers every call) at 4 ranks
# sharing the H200 under MPS: ours (mapped zero-copy from 1 MB) against stock NCCL 2.30.7 and against
# ours with MSCCLPP_NCCL_ZERO_COPY=0, for all_reduce (8 B-256 MB) and all_gather, reduce_scatter,
# broadcast (8 B-64 MB).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 400 python3 -m pytest -q -rfEs -p no:cacheprovider --durations=0 tests/test_zero_copy_gpu.py \
  tests/test_windows_gpu.py "tests/test_allreduce_gpu.py::test_allreduce_scenarios" \
  "tests/test_allreduce_gpu.py::test_allreduce_forced_algorithm[chunked-8]" > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(grep -E ' passed| failed' "$OUT/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head
echo "mapped ready lines: $(grep -c 'mapped, ready' "$OUT/tests.log"), not ready: $(grep -c 'mapped, not ready' "$OUT/tests.log")"
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
stock=/tmp/stock/nccl-2.30.7-sm90/lib
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json MSCCLPP_NCCL_WAIT_TIMEOUT=30
mkdir -p build "$OUT/timer"
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
one() {  # label lib collective max [env...]
  local label=$1 lib=$2 coll=$3 max=$4; shift 4
  env "$@" LD_LIBRARY_PATH=$lib timeout 80 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 70 -- \
    build/nccl_timer $coll 8 $max 2 20 > "$OUT/timer/${label}_${coll}_4.txt" 2>&1 || echo "timer $label $coll failed"
}
for coll in all_reduce all_gather reduce_scatter broadcast; do
  max=67108864; [ $coll = all_reduce ] && max=268435456
  one stock $stock $coll $max NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8 NCCL_NVLS_ENABLE=0
  one ours $PWD/mscclpp_nccl/lib $coll $max
  one scratch $PWD/mscclpp_nccl/lib $coll $max MSCCLPP_NCCL_ZERO_COPY=0
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
tar czf "$OUT/timer.tgz" -C "$OUT" timer
echo "timer files: $(ls $OUT/timer | wc -l)"
