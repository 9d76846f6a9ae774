# Device run U (session 6): kernels named by collective (exchange kernels take a collective tag): every
# collective, type, op, in and out of place, graphs, groups (test_collective_scenarios) at 4 ranks, and the
# chunked exchange forced, exact against NumPy.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=20
timeout 250 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_collectives_gpu.py -k "scenarios and 4 or forced_algorithm and 4" > "$OUT/collectives.log" 2>&1
echo "collectives rc=$?: $(grep -E 'passed|failed' "$OUT/collectives.log" | tail -1)"
grep -E "^FAILED|^ERROR" "$OUT/collectives.log" | head
