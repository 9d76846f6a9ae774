# Device run X (session 7): issue 12 performance on fake hosts. all_reduce 8 B-256 MB hierarchical (ours
# with stock rails) against all-stock (ours with MSCCLPP_NCCL_FALLBACK=all) and stock NCCL 2.30.7 alone,
# interleaved passes; all_gather and reduce_scatter at 2x2; the same layouts at 8 ranks.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
stockdir=/tmp/stock/nccl-2.30.7-sm90/lib
export MSCCLPP_NCCL_FALLBACK_LIB=$stockdir/libnccl.so.2
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=30 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p build "$OUT/timer"
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
one() {  # label ranks hosts collective maxbytes [env...]
  local label=$1 n=$2 hosts=$3 coll=$4 max=$5; shift 5
  case $label in
    stock*) env "$@" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=$((32 / n)) LD_LIBRARY_PATH=$stockdir timeout 150 python3 -m mscclpp_nccl.run -n $n --mps --timeout 140 -- build/nccl_timer $coll 8 $max 4 20 ;;
    *) env "$@" LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 150 python3 -m mscclpp_nccl.run -n $n --mps --timeout 140 --fake-hosts $hosts -- build/nccl_timer $coll 8 $max 4 20 ;;
  esac > "$OUT/timer/${label}_${coll}_${n}x${hosts}.txt" 2>&1 || echo "timer $label $coll $n/$hosts failed"
}
for pass in a b; do
  one hier_$pass 4 2 all_reduce 268435456
  one allstock_$pass 4 2 all_reduce 268435456 MSCCLPP_NCCL_FALLBACK=all
  one stock_$pass 4 2 all_reduce 268435456
done
for coll in all_gather reduce_scatter; do
  one hier_a 4 2 $coll 268435456
  one allstock_a 4 2 $coll 268435456 MSCCLPP_NCCL_FALLBACK=all
done
for hosts in 2 4; do
  one hier_a 8 $hosts all_reduce 268435456
  one allstock_a 8 $hosts all_reduce 268435456 MSCCLPP_NCCL_FALLBACK=all
done
one stock_a 8 2 all_reduce 268435456
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
tar czf "$OUT/timer.tgz" -C "$OUT" timer && rm -rf "$OUT/timer"
cat "$OUT/timer_summary.md" | head -120
timeout 110 python3 -m pytest -q -rfEs -p no:cacheprovider "tests/test_apps_gpu.py::test_ddp_over_fake_hosts[8-4]" > "$OUT/ddp84.log" 2>&1
echo "ddp 4x2 rc=$?: $(grep -E 'passed|failed|error' "$OUT/ddp84.log" | tail -1)"
