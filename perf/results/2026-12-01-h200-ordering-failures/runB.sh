# Device run B: ordering check (previous library with one-stream groups, to show the check catches the
# race; ours at 4 and 8), the C timer before/after (eager pass before any capture), the PyTorch
# applications at 2/4/8 ranks, then the failure tests.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
soc() {  # name libdir nranks [env...]
  local name=$1 dir=$2 n=$3; shift 3
  env "$@" MSCCLPP_NCCL_WAIT_TIMEOUT=20 LD_LIBRARY_PATH=$dir timeout 100 python3 -m mscclpp_nccl.run -n "$n" --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_${name}_$n.log" 2>&1
  echo "stream_order $name n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_${name}_$n.log") first_fail: $(grep -m1 FAIL "$OUT/soc_${name}_$n.log" | cut -c1-200)"
}
soc previous_one_stream_groups "$kit/before" 4 STREAM_ORDER_ONE_STREAM_GROUPS=1
soc ours "$PWD/mscclpp_nccl/lib" 4
soc ours "$PWD/mscclpp_nccl/lib" 8
mkdir -p "$OUT/timer"
for rep in 1 2; do
  for lib in previous ours; do
    dir=$PWD/mscclpp_nccl/lib; [ $lib = previous ] && dir=$kit/before
    LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 1048576 4 200 > "$OUT/timer/${lib}_$rep.txt" 2>&1 || echo "timer $lib $rep failed"
  done
done
python3 perf/timer_summary.py "$OUT/timer"
timeout 280 python3 -m pytest -q -rA -p no:cacheprovider tests/test_apps_gpu.py > "$OUT/apps.log" 2>&1
echo "apps rc=$?"
grep -h "RESULT" "$OUT/apps.log" | sed 's/^.*RESULT/RESULT/' | sort | uniq | head -40
grep -E "passed|failed|^FAILED|^ERROR" "$OUT/apps.log" | tail -8
timeout 200 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "mid_collective or (blocked and 4) or (init and 4)" > "$OUT/failures.log" 2>&1
echo "failures rc=$?"
grep -E "RESULT" "$OUT/failures.log" | sed 's/^.*RESULT/RESULT/' | sort | head -40
grep -E "passed|failed|^FAILED|^ERROR" "$OUT/failures.log" | tail -12
