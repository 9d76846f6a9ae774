# Device run 2 (session 12): zero-copy all_gather and broadcast push (each range read once), the
# reduce-to-one loop at 4 units x 2 ranks. The loop bench; ordering across streams at 2, 4 and 8 ranks;
# the zero-copy suite at 2, 4 and 8 and switched off; the collective, send/recv and all-reduce suites;
# then perf/side_by_side.sh at 2, 4 and 8 ranks.
set -u
kit=$PWD/.devkit
logs=/tmp/run2_logs && mkdir -p $logs  # packed into $OUT/logs.tgz at the end (few files come back)
source "$kit/device/prepare.sh" > "$logs/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2
for n in 2 4 8; do
  LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- build/stream_order_check > "$logs/stream_order_$n.log" 2>&1
  echo "stream_order n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$logs/stream_order_$n.log") $(grep -m1 FAIL "$logs/stream_order_$n.log" | cut -c1-160)"
done
timeout 400 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 tests/test_zero_copy_gpu.py \
  tests/test_collectives_gpu.py::test_collective_scenarios tests/test_collectives_gpu.py::test_p2p_chunked_forced \
  tests/test_collectives_gpu.py::test_p2p_many_peers tests/test_allreduce_gpu.py::test_allreduce_scenarios \
  > "$logs/tests.log" 2>&1
echo "tests rc=$?: $(grep -E ' passed| failed' "$logs/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$logs/tests.log" | head
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150
SECONDS=0
bash perf/side_by_side.sh "$logs/timer" /tmp/stock/nccl-2.30.7-sm90/lib "2 4 8" all_reduce all_gather reduce_scatter \
  alltoall broadcast reduce gather scatter sendrecv
echo "side by side: ${SECONDS}s"
python3 perf/side_by_side.py "$logs/timer" > "$OUT/side_by_side.md" 2>&1
tar -czf "$OUT/logs.tgz" -C "$logs" .
cat "$OUT/side_by_side.md"
