# Device run A (main tree, library built on the CPU machine and carried): the C ordering check (ours at
# 2/4/8 ranks, the previous library at 4), the C timer before/after (4-rank all_reduce, interleaved,
# twice), then the mid-collective kill tests and abort-while-blocked at 4 ranks.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
soc() {  # name libdir nranks
  MSCCLPP_NCCL_WAIT_TIMEOUT=20 LD_LIBRARY_PATH=$2 timeout 100 python3 -m mscclpp_nccl.run -n "$3" --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_$1_$3.log" 2>&1
  echo "stream_order $1 n=$3 rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_$1_$3.log") first_fail: $(grep -m1 FAIL "$OUT/soc_$1_$3.log" | cut -c1-220)"
}
for n in 2 4 8; do soc ours "$PWD/mscclpp_nccl/lib" $n; done
soc previous "$kit/before" 4
mkdir -p "$OUT/timer"
for rep in 1 2; do
  for lib in previous ours; do
    dir=$PWD/mscclpp_nccl/lib; [ $lib = previous ] && dir=$kit/before
    LD_LIBRARY_PATH=$dir timeout 100 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 90 -- build/nccl_timer all_reduce 8 1048576 4 200 > "$OUT/timer/${lib}_$rep.txt" 2>&1
    echo "timer $lib $rep rc=$?"
  done
done
python3 perf/timer_summary.py "$OUT/timer"
timeout 330 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "mid_collective or (blocked and 4)" > "$OUT/failures.log" 2>&1
echo "failures rc=$?"
grep -E "RESULT|ncclCommAbort:|teardown" "$OUT/failures.log" | sed 's/^.*\(RESULT\)/\1/' | sort | uniq -c | sort -rn | head -12
grep -E "passed|failed|^FAILED|^ERROR" "$OUT/failures.log" | tail -12
