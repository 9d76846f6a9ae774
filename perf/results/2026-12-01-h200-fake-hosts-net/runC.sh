# Device run C (session 8): where abort's time goes when a rank dies over fake hosts whose stock
# communicators use stock's network transport (world route, all-stock, and hierarchical with fewer
# queued calls); then DDP at 2 hosts of 4, peer death over fake hosts, and the 2x2 suites.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_FALLBACK_LIB=/tmp/stock/nccl-2.30.7-sm90/lib/libnccl.so.2
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=30 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
kill_one() {  # label [env...]
  local label=$1; shift
  local shared; shared=$(mktemp -d)
  env "$@" MSCCLPP_NCCL_WAIT_TIMEOUT=0 FAILURE_EXTRA_S=30 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
    timeout 90 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 80 --fake-hosts 2 -- \
    python3 tests/gpu/failure_worker.py "$shared" collective:abort > "$OUT/kill_$label.log" 2>&1
  echo "kill $label rc=$?: $(grep -c 'PASS collective' "$OUT/kill_$label.log") passed"
  grep -E "RESULT|ncclCommAbort took" "$OUT/kill_$label.log" | sed 's/.*NCCL INFO //' | head -12
  python3 -c "import sys; sys.path.insert(0, 'tests'); from multirank import wait_for_device; wait_for_device()" 2>/dev/null || sleep 3
}
kill_one world MSCCLPP_NCCL_HIERARCHY_MIN_BYTES=262144
kill_one allstock MSCCLPP_NCCL_FALLBACK=all
kill_one hier MSCCLPP_NCCL_HIERARCHY_MIN_BYTES=0 FAILURE_QUEUED_CALLS=32
suite() {  # name seconds pytest-args...
  local name=$1 s=$2; shift 2
  timeout "$s" python3 -m pytest -q -rfEs -p no:cacheprovider "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$?: $(grep -E 'passed|failed|error' "$OUT/$name.log" | tail -1)"
  grep -E "^(FAILED|ERROR)" "$OUT/$name.log" | head -8
}
suite fakehost_apps 200 tests/test_apps_gpu.py -k "8-2 or peer_death_over"
suite hier_2x2 150 tests/test_hierarchical_gpu.py -k "2x2"
