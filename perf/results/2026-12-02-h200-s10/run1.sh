# Device run 1 (session 10): the reduce-loop microbenchmark (perf/reduce_loop_bench.cu, built here
# beforehand and carried as build/reduce_loop_bench), then the GPU tests that had not run since the
# zero-copy change and the early-launch census: the 8-rank suites and the forced chunked all-reduce at 8
# ranks (run3.sh of session 9), then the PyTorch applications and peer-death tests.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 60 build/reduce_loop_bench 32 > "$OUT/bench.txt" 2>&1; echo "bench rc=$?"
cuobjdump -sass build/reduce_loop_bench > "$OUT/bench.sass" 2>&1
timeout 200 python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 \
  "tests/test_allreduce_gpu.py::test_allreduce_forced_algorithm[chunked-8]" \
  "tests/test_allreduce_gpu.py::test_allreduce_scenarios[8]" "tests/test_collectives_gpu.py::test_collective_scenarios[8]" \
  > "$OUT/tests8.log" 2>&1
echo "tests8 rc=$?: $(grep -E ' passed| failed' "$OUT/tests8.log" | tail -1)"
timeout 330 python3 -m pytest -v -rfEsP -p no:cacheprovider --durations=0 \
  "tests/test_apps_gpu.py::test_app" "tests/test_apps_gpu.py::test_peer_death_then_destroy_process_group" \
  > "$OUT/apps.log" 2>&1
echo "apps rc=$?: $(grep -E ' passed| failed' "$OUT/apps.log" | tail -1)"
grep -hE "^(FAILED|ERROR)" "$OUT/tests8.log" "$OUT/apps.log" | head
cat "$OUT/bench.txt"
