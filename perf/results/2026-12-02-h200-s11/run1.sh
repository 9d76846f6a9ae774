# Device run 1 (session 11): branch fused-mapped-kernel (one kernel per mapped call, the chunked schedule
# run by the mapped kernel itself when the ranks agree on scratch). The zero-copy suite at 2, 4 and 8
# ranks and switched off, the collective and all-reduce suites, then perf/side_by_side.sh at 4 and 8
# ranks against stock NCCL 2.30.7 (compare with session 10's run 3). First perf/launch_cost_bench.cu alone and
# as four processes at once under MPS.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
mkdir -p build && nvcc -O2 -o build/launch_cost_bench perf/launch_cost_bench.cu
timeout 60 build/launch_cost_bench > "$OUT/launch_cost_1.txt" 2>&1
for i in 1 2 3 4; do timeout 60 build/launch_cost_bench > "$OUT/launch_cost_4_$i.txt" 2>&1 & done; wait
timeout 330 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 tests/test_zero_copy_gpu.py \
  "tests/test_collectives_gpu.py::test_collective_scenarios[2]" "tests/test_collectives_gpu.py::test_collective_scenarios[8]" \
  "tests/test_allreduce_gpu.py::test_allreduce_scenarios[2]" "tests/test_allreduce_gpu.py::test_allreduce_scenarios[4]" \
  "tests/test_allreduce_gpu.py::test_allreduce_scenarios[8]" > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(grep -E ' passed| failed' "$OUT/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2
for n in 4 8; do
  LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- build/stream_order_check > "$OUT/stream_order_$n.log" 2>&1
  echo "stream_order n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/stream_order_$n.log") $(grep -m1 FAIL "$OUT/stream_order_$n.log" | cut -c1-160)"
done
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150
SECONDS=0
bash perf/side_by_side.sh "$OUT/timer" /tmp/stock/nccl-2.30.7-sm90/lib "4 8" all_reduce all_gather reduce_scatter \
  alltoall broadcast reduce gather scatter sendrecv
echo "side by side: ${SECONDS}s"
python3 perf/side_by_side.py "$OUT/timer" > "$OUT/side_by_side.md" 2>&1
tar -czf "$OUT/timer.tgz" -C "$OUT" timer && rm -rf "$OUT/timer"
cat "$OUT/side_by_side.md"
echo "launch cost, one process:"; cat "$OUT/launch_cost_1.txt"
echo "launch cost, four at once (the first):"; cat "$OUT/launch_cost_4_1.txt"
