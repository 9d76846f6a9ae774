# Device run O (session 6): the shipped build (tickets, moving record node, bounded frame queue, handle
# quarantine, finalize reporting the async error). Peer-death tests; a normal-exit diagnosis with a
# SIGSEGV backtrace printer; issue 11's GPU bad-input tests; kill and abort tests at 4; the C ordering
# check at 4 and 8; FSDP2 and DDP at 4; ranks in one process, CuPy; the timer against before (same table).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p "$OUT/timer"
for pass in a b; do
  for lib in 1_before 2_ours; do
    dir=$PWD/mscclpp_nccl/lib; [ $lib = 1_before ] && dir=$kit/before
    LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 131072 4 500 > "$OUT/timer/${lib}_$pass.txt" 2>&1 || echo "timer $lib $pass failed"
  done
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
for n in 4 8; do
  MSCCLPP_NCCL_WAIT_TIMEOUT=20 LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_$n.log" 2>&1
  echo "stream_order n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_$n.log") $(grep -m1 FAIL "$OUT/soc_$n.log" | cut -c1-160)"
done
MSCCLPP_NCCL_WAIT_TIMEOUT=20 timeout 200 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_bad_input.py -k "destroyed or unknown_registration or abort_and_destroy or too_many_rounds or one_process or cupy_client" tests/test_one_process_gpu.py "tests/test_cupy_client.py::test_cupy_client[4]" > "$OUT/suite.log" 2>&1
echo "bad_input(gpu)+one_process+cupy rc=$?: $(grep -E 'passed|failed' "$OUT/suite.log" | tail -1)"
timeout 120 python3 -m pytest -q -rA -p no:cacheprovider tests/test_apps_gpu.py -k "test_app and (fsdp2-4 or ddp-4)" > "$OUT/apps.log" 2>&1
echo "apps rc=$?: $(grep -E 'passed|failed' "$OUT/apps.log" | tail -1)"
grep -h "RESULT" "$OUT/apps.log" | sed 's/^.*RESULT/RESULT/' | sort -u
timeout 150 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "4 and (mid_collective or blocked)" > "$OUT/failures.log" 2>&1
echo "failures rc=$?: $(grep -E 'passed|failed' "$OUT/failures.log" | tail -1)"
grep -E "RESULT" "$OUT/failures.log" | sed 's/^.*RESULT/RESULT/' | sort | head -20
timeout 200 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_apps_gpu.py -k "peer_death" > "$OUT/peer_death.log" 2>&1
echo "peer_death rc=$?: $(grep -E 'passed|failed' "$OUT/peer_death.log" | tail -1)"
grep -E "RESULT" "$OUT/peer_death.log" | sed 's/^.*RESULT/RESULT/' | sort -u | head -20
for i in 1 2 3; do
  LD_PRELOAD=$kit/segv.so PEER_DEATH_NORMAL_EXIT=1 timeout 100 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_apps_gpu.py -k "peer_death and 0-4" > "$OUT/normal_exit_$i.log" 2>&1
  echo "normal exit try $i: $(grep -E 'exited with code' "$OUT/normal_exit_$i.log" | sort | uniq -c | tr '\n' ';')"
  grep -E "libnccl.so.2\(|segv.so\(|libtorch|libc10" "$OUT/normal_exit_$i.log" | grep -v "frame #" | head -12
done
tar czf "$OUT/timer.tgz" -C "$OUT" timer && rm -rf "$OUT/timer"
cat "$OUT/timer_summary.md"
