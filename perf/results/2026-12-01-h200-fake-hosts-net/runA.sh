# Device run A (session 8): stock sees the fake hosts as hosts (NCCL_HOSTID per fake host, so its
# network transport joins them, over loopback sockets). Checks that stock takes NET between fake hosts,
# times all_reduce all-stock against hierarchical at 4 ranks (2 hosts of 2) and 8 ranks (2 hosts of 4),
# then runs the failure tests left unrun in session 7 (runZ3).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
stockdir=/tmp/stock/nccl-2.30.7-sm90/lib
export MSCCLPP_NCCL_FALLBACK_LIB=$stockdir/libnccl.so.2
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=60 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
cat /proc/net/dev > "$OUT/netdev.txt"
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p build "$OUT/timer"
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
ours() { LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 130 python3 -m mscclpp_nccl.run -n $1 --mps --timeout 120 --fake-hosts $2 -- build/nccl_timer "${@:3}"; }
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV ours 4 2 all_reduce 8 1024 2 5 > "$OUT/transport.log" 2>&1
echo "transport rc=$?: $(grep -c 'via NET' "$OUT/transport.log") NET lines, $(grep -c 'via P2P\|via SHM' "$OUT/transport.log") P2P/SHM lines"
grep -m3 -E "via NET|NCCL_HOSTID|Using network" "$OUT/transport.log"
one() {  # label ranks hosts [env...]
  local label=$1 n=$2 hosts=$3; shift 3
  env "$@" bash -c "$(declare -f ours); ours $n $hosts all_reduce 8 268435456 2 20" \
    > "$OUT/timer/${label}_all_reduce_${n}x${hosts}.txt" 2>&1 || echo "timer $label $n/$hosts failed"
}
for n_h in "4 2" "8 2"; do
  set -- $n_h
  one allstock $1 $2 MSCCLPP_NCCL_FALLBACK=all
  one hier $1 $2
  one hier0 $1 $2 MSCCLPP_NCCL_HIERARCHY_MIN_BYTES=0
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
tar czf "$OUT/timer.tgz" -C "$OUT" timer
cat "$OUT/timer_summary.md"
timeout 170 python3 -m pytest -q -rfEs -p no:cacheprovider --durations=10 tests/test_hierarchical_gpu.py -k "killed or blocked" > "$OUT/fail.log" 2>&1
echo "failures rc=$?: $(grep -E 'passed|failed|error' "$OUT/fail.log" | tail -1)"
grep -E "^(FAILED|ERROR)|AssertionError" "$OUT/fail.log" | grep -v "NCCL INFO" | head -10
