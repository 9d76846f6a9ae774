#!/usr/bin/env bash
# The GPU tests in two parts of under ten minutes each (on one H200 shared by the ranks under MPS), for
# machines that limit one command's time. Usage: tests/gpu_suite.sh 1|2 [LOGDIR]
#   part 1: all-reduce and collectives at 2, 4 and 8 ranks, default and forced algorithms (about 6 min)
#   part 2: tuning, bench, ranks in one process, ncclMemAlloc, CuPy, PyTorch, tuner (about 8 min)
set -u
part=${1:?usage: tests/gpu_suite.sh 1|2 [LOGDIR]}
log=${2:-.}/gpu_suite_$part.log
export MSCCLPP_NCCL_WAIT_TIMEOUT=${MSCCLPP_NCCL_WAIT_TIMEOUT:-20} MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=${MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT:-30}
case $part in
  1) tests=(tests/test_allreduce_gpu.py tests/test_collectives_gpu.py) ;;
  2) tests=(tests/test_tuning_gpu.py tests/test_bench_gpu.py tests/test_one_process_gpu.py tests/test_mem_alloc_gpu.py
       tests/test_cupy_client.py tests/test_torch_client.py tests/test_tune_gpu.py) ;;
  *) echo "part is 1 or 2" >&2; exit 2 ;;
esac
timeout "${SUITE_TIMEOUT:-570}" python -m pytest -q -rfEs --durations=0 "${tests[@]}" >"$log" 2>&1
status=$?
grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$log" | tail -20
exit $status
