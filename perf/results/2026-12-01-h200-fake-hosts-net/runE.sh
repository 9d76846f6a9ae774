# Device run E (session 8): small all_reduce (8 B-64 KB, 50 calls a size) all-stock against the
# default, three interleaved passes at 2 hosts of 2 and of 4, to tell noise from a real deficit where
# both run the same stock call; then the fake-host suites at 4x2, interleaved and uneven hosts.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_FALLBACK_LIB=/tmp/stock/nccl-2.30.7-sm90/lib/libnccl.so.2
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=60 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p build "$OUT/timer"
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
one() {  # label ranks hosts [env...]
  local label=$1 n=$2 hosts=$3; shift 3
  env "$@" LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 60 python3 -m mscclpp_nccl.run -n $n --mps \
    --timeout 50 --fake-hosts $hosts -- build/nccl_timer all_reduce 8 65536 2 50 \
    > "$OUT/timer/${label}_all_reduce_${n}x${hosts}.txt" 2>&1 || echo "timer $label $n/$hosts failed"
}
for pass in 1 2 3; do
  for n_h in "4 2" "8 2"; do
    set -- $n_h
    one allstock_p$pass $1 $2 MSCCLPP_NCCL_FALLBACK=all
    one default_p$pass $1 $2
  done
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
tar czf "$OUT/timer.tgz" -C "$OUT" timer && rm -rf "$OUT/timer"
echo "timer files: $(tar tzf "$OUT/timer.tgz" | grep -c txt)"
timeout 260 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_hierarchical_gpu.py \
  -k "collectives_over and (4x2 or interleaved or uneven)" > "$OUT/suites.log" 2>&1
echo "suites rc=$?: $(grep -E 'passed|failed|error' "$OUT/suites.log" | tail -1)"
grep -E "^(FAILED|ERROR)" "$OUT/suites.log" | head
