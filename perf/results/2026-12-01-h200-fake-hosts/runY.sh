# Device run Y (session 7): all_reduce without the copy, and small collectives on the world comm below
# MSCCLPP_NCCL_HIERARCHY_MIN_BYTES. The fake-host suites that cover the plans (the tests force
# MIN_BYTES=0), then all_reduce hierarchical against all-stock and stock at 2x2 and 4x2, up to 256 MB.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
stockdir=/tmp/stock/nccl-2.30.7-sm90/lib
export MSCCLPP_NCCL_FALLBACK_LIB=$stockdir/libnccl.so.2
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=30 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
timeout 300 python3 -m pytest -q -rfEs -p no:cacheprovider --durations=10 tests/test_hierarchical_gpu.py -k "2x2 or 4x2 or interleaved" > "$OUT/hier.log" 2>&1
echo "hierarchical suite rc=$?: $(grep -E 'passed|failed|error' "$OUT/hier.log" | tail -1)"
grep -E "^(FAILED|ERROR)|AssertionError|gave up" "$OUT/hier.log" | grep -v "NCCL INFO" | head -12
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p build "$OUT/timer"
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
one() {  # label ranks hosts collective maxbytes [env...]
  local label=$1 n=$2 hosts=$3 coll=$4 max=$5; shift 5
  case $label in
    stock*) env "$@" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=$((32 / n)) LD_LIBRARY_PATH=$stockdir timeout 150 python3 -m mscclpp_nccl.run -n $n --mps --timeout 140 -- build/nccl_timer $coll 8 $max 2 20 ;;
    *) env "$@" LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 150 python3 -m mscclpp_nccl.run -n $n --mps --timeout 140 --fake-hosts $hosts -- build/nccl_timer $coll 8 $max 2 20 ;;
  esac > "$OUT/timer/${label}_${coll}_${n}x${hosts}.txt" 2>&1 || echo "timer $label $coll $n/$hosts failed"
}
for n_h in "4 2" "8 4"; do
  set -- $n_h
  one hier_a $1 $2 all_reduce 268435456
  one allstock_a $1 $2 all_reduce 268435456 MSCCLPP_NCCL_FALLBACK=all
  one hier0_a $1 $2 all_reduce 268435456 MSCCLPP_NCCL_HIERARCHY_MIN_BYTES=0
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
tar czf "$OUT/timer.tgz" -C "$OUT" timer && rm -rf "$OUT/timer"
cat "$OUT/timer_summary.md"
