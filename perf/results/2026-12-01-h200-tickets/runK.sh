# Device run K (session 6): the failure contract on the ticket build. Issue 11's GPU halves of
# test_bad_input and the fd-passing/one-process/CuPy tests first (no kills), then the mid-collective kill
# tests at 2 and 8 ranks, then PyTorch's destroy_process_group after a peer's death at 2 and 4 ranks.
set -u
kit=$PWD/.devkit
[ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] || source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
MSCCLPP_NCCL_WAIT_TIMEOUT=20 timeout 200 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_bad_input.py -k "destroyed or unknown_registration or abort_and_destroy or too_many_rounds or one_process or cupy_client" tests/test_one_process_gpu.py "tests/test_cupy_client.py::test_cupy_client[4]" > "$OUT/suite.log" 2>&1
echo "bad_input(gpu)+one_process+cupy rc=$?: $(grep -E 'passed|failed' "$OUT/suite.log" | tail -1)"
grep -E "^FAILED|^ERROR" "$OUT/suite.log" | head
timeout 150 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "mid_collective and (2 or 8)" > "$OUT/failures.log" 2>&1
echo "failures rc=$?: $(grep -E 'passed|failed' "$OUT/failures.log" | tail -1)"
grep -E "RESULT" "$OUT/failures.log" | sed 's/^.*RESULT/RESULT/' | sort | uniq -c | head -20
timeout 200 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_apps_gpu.py -k "peer_death" > "$OUT/peer_death.log" 2>&1
echo "peer_death rc=$?: $(grep -E 'passed|failed' "$OUT/peer_death.log" | tail -1)"
grep -E "RESULT" "$OUT/peer_death.log" | sed 's/^.*RESULT/RESULT/' | head -20
