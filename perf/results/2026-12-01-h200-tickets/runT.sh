# Device run T (session 6): the final build (NVTX ranges on every entry point, NCCL_DEBUG_FILE, the wait
# timeout helper): the C ordering check at 4, FSDP2 at 4, bad-input GPU tests, ranks in one process, CuPy,
# windows at 4, and the timer against before (same table) to see the ranges' cost.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p "$OUT/timer"
for pass in a b; do
  for lib in 1_before 2_ours; do
    dir=$PWD/mscclpp_nccl/lib; [ $lib = 1_before ] && dir=$kit/before
    LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 32768 4 500 > "$OUT/timer/${lib}_$pass.txt" 2>&1 || echo "timer $lib $pass failed"
  done
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
MSCCLPP_NCCL_WAIT_TIMEOUT=20 LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 100 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_4.log" 2>&1
echo "stream_order n=4 rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_4.log")"
MSCCLPP_NCCL_WAIT_TIMEOUT=20 timeout 240 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_bad_input.py -k "destroyed or unknown_registration or abort_and_destroy or too_many_rounds or one_process or cupy_client or windows" tests/test_one_process_gpu.py "tests/test_cupy_client.py::test_cupy_client[4]" tests/test_windows_gpu.py > "$OUT/suite.log" 2>&1
echo "bad_input(gpu)+one_process+cupy+windows rc=$?: $(grep -E 'passed|failed' "$OUT/suite.log" | tail -1)"
grep -E "^FAILED|^ERROR" "$OUT/suite.log" | head
timeout 100 python3 -m pytest -q -rA -p no:cacheprovider tests/test_apps_gpu.py -k "test_app and fsdp2-4" > "$OUT/apps.log" 2>&1
echo "apps rc=$?: $(grep -E 'passed|failed' "$OUT/apps.log" | tail -1)"
tar czf "$OUT/timer.tgz" -C "$OUT" timer && rm -rf "$OUT/timer"
cat "$OUT/timer_summary.md"
