# Device run C: the ordering check against the previous library (groups kept on one stream, so only
# ordering differs), the C timer (previous, ours, ours with NCCL_GRAPH_MIXING_SUPPORT=0), the failure
# tests not yet run, and the GPU tests most exposed to the group and ordering changes.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
STREAM_ORDER_ONE_STREAM_GROUPS=1 MSCCLPP_NCCL_WAIT_TIMEOUT=20 LD_LIBRARY_PATH=$kit/before timeout 100 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_previous_one_stream_groups_4.log" 2>&1
echo "stream_order previous (one-stream groups) n=4 rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_previous_one_stream_groups_4.log"): $(grep -m2 FAIL "$OUT/soc_previous_one_stream_groups_4.log" | cut -c1-160)"
mkdir -p "$OUT/timer"
timer() {  # name libdir [env...]
  local name=$1 dir=$2; shift 2
  env "$@" LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 1048576 4 200 > "$OUT/timer/$name.txt" 2>&1 || echo "timer $name failed"
}
timer 1_previous "$kit/before"; timer 2_ours "$PWD/mscclpp_nccl/lib"; timer 3_ours_no_graph_mixing "$PWD/mscclpp_nccl/lib" NCCL_GRAPH_MIXING_SUPPORT=0
python3 perf/timer_summary.py "$OUT/timer" | tee "$OUT/timer_summary.md"
timeout 150 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "blocked or (init and (2 or 8))" > "$OUT/failures.log" 2>&1
echo "failures rc=$?"
grep -E "RESULT" "$OUT/failures.log" | sed 's/^.*RESULT/RESULT/' | sort | uniq -c | head -30
grep -E "passed|failed|^FAILED|^ERROR" "$OUT/failures.log" | tail -8
export MSCCLPP_NCCL_WAIT_TIMEOUT=20
timeout 240 python3 -m pytest -q -rfEs -p no:cacheprovider --durations=0 tests/test_one_process_gpu.py "tests/test_allreduce_gpu.py::test_allreduce_scenarios[4]" "tests/test_collectives_gpu.py::test_collective_scenarios[4]" "tests/test_collectives_gpu.py::test_collective_scenarios[8]" "tests/test_torch_client.py::test_torch_client[4]" > "$OUT/suite.log" 2>&1
echo "suite rc=$?"
grep -E "passed|failed|^FAILED|^ERROR|s call" "$OUT/suite.log" | tail -14
