# Device run G: the library that records its ordering event in every eager call (never touching a
# stream after its calls returned). Ranks in one process (temporary streams) first, the C ordering check
# at 2/4/8, the C timer against the previous library, FSDP2/DDP at 2 and 4 ranks, CuPy, then the kill tests at 4.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
MSCCLPP_NCCL_WAIT_TIMEOUT=20 timeout 100 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_one_process_gpu.py "tests/test_cupy_client.py::test_cupy_client[4]" > "$OUT/suite.log" 2>&1
echo "one_process+cupy rc=$?: $(grep -E 'passed|failed' "$OUT/suite.log" | tail -1)"
for n in 2 4 8; do
  MSCCLPP_NCCL_WAIT_TIMEOUT=20 timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_ours_$n.log" 2>&1
  echo "stream_order ours n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_ours_$n.log") $(grep -m1 FAIL "$OUT/soc_ours_$n.log" | cut -c1-160)"
done
mkdir -p "$OUT/timer"
for lib in 1_previous 2_ours; do
  dir=$PWD/mscclpp_nccl/lib; [ $lib = 1_previous ] && dir=$kit/before
  LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 1048576 4 200 > "$OUT/timer/$lib.txt" 2>&1 || echo "timer $lib failed"
done
python3 perf/timer_summary.py "$OUT/timer" | tee "$OUT/timer_summary.md"
timeout 150 python3 -m pytest -q -rA -p no:cacheprovider tests/test_apps_gpu.py -k "(fsdp2 or ddp) and (2 or 4)" > "$OUT/apps.log" 2>&1
echo "apps rc=$?: $(grep -E 'passed|failed' "$OUT/apps.log" | tail -1)"
grep -h "RESULT" "$OUT/apps.log" | sed 's/^.*RESULT/RESULT/' | sort -u
timeout 80 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "mid_collective and 4" > "$OUT/failures.log" 2>&1
echo "failures rc=$?: $(grep -E 'passed|failed' "$OUT/failures.log" | tail -1)"
grep -E "RESULT" "$OUT/failures.log" | sed 's/^.*RESULT/RESULT/' | sort -u
