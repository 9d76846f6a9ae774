# Device run W (session 7): issue 12 wiring, first GPU run. A smoke test on 2x2 fake hosts, then the
# fake-host suites, the stock-only suite and the refusal, then DDP over fake hosts.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_FALLBACK_LIB=/tmp/stock/nccl-2.30.7-sm90/lib/libnccl.so.2
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=30 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
ls -la $MSCCLPP_NCCL_FALLBACK_LIB | tail -1
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL timeout 90 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 80 --fake-hosts 2 -- python3 tests/gpu/hierarchy_worker.py mixed_group > "$OUT/smoke.log" 2>&1
echo "smoke rc=$? passes=$(grep -c 'PASS mixed_group' "$OUT/smoke.log")"
grep -E "path|stock|WARN|Error|error" "$OUT/smoke.log" | grep -v "^.*INFO.*COLL" | head -20
timeout ${SUITE_S:-330} python3 -m pytest -q -rfEs -p no:cacheprovider --durations=20 tests/test_hierarchical_gpu.py > "$OUT/hier.log" 2>&1
echo "hierarchical suite rc=$?: $(grep -E 'passed|failed|error' "$OUT/hier.log" | tail -1)"
grep -E "^(FAILED|ERROR)|AssertionError|Error:" "$OUT/hier.log" | head -20
timeout 120 python3 -m pytest -q -rfEs -p no:cacheprovider "tests/test_apps_gpu.py::test_ddp_over_fake_hosts[4-2]" > "$OUT/ddp.log" 2>&1
echo "ddp 2x2 rc=$?: $(grep -E 'passed|failed|error' "$OUT/ddp.log" | tail -1)"
tail -5 "$OUT/hier.log"
