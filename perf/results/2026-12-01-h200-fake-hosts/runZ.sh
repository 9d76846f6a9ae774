# Device run Z (session 7): failures on fake hosts (a rank killed mid-collective, abort while split or
# shrink is blocked, PyTorch peer death), and DDP over 2 hosts of 4.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_FALLBACK_LIB=/tmp/stock/nccl-2.30.7-sm90/lib/libnccl.so.2
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
timeout 330 python3 -m pytest -q -rfEs -p no:cacheprovider --durations=10 tests/test_hierarchical_gpu.py -k "killed or blocked" "tests/test_apps_gpu.py::test_peer_death_over_fake_hosts" "tests/test_apps_gpu.py::test_ddp_over_fake_hosts[8-2]" > "$OUT/fail.log" 2>&1
echo "failures rc=$?: $(grep -E 'passed|failed|error' "$OUT/fail.log" | tail -1)"
grep -E "^(FAILED|ERROR)|AssertionError|RESULT" "$OUT/fail.log" | grep -v "NCCL INFO" | head -20
grep -E "^[0-9.]+s call" "$OUT/fail.log"
