# Device run 4 (session 10): re-tune the seven exchange collectives at 8 ranks (until now they had only
# built-in rules there), merged into a copy of the shipped table, then perf/side_by_side.sh at 8 ranks
# with that table (ours with the shipped table is run 3's).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=30 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
cp mscclpp_nccl/tuning/default.json "$OUT/tuning.json"
SECONDS=0
timeout 330 python3 -m mscclpp_nccl.tune -N 8 --collectives all_gather,reduce_scatter,alltoall,broadcast,reduce,gather,scatter \
  -b 8 -e 256M -f 4 --candidates exchange_packet exchange_chunked exchange_chunked/0/0/65536 \
  --out "$OUT/tuning.json" --raw "$OUT/raw_exchange_8.json" > "$OUT/tune_exchange_8.log" 2>&1
echo "tune rc=$? in ${SECONDS}s"; tail -n 25 "$OUT/tune_exchange_8.log"
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export TIMER_TIMEOUT=120
MSCCLPP_NCCL_TUNING_FILE=$OUT/tuning.json bash perf/side_by_side.sh /tmp/tuned /tmp/stock/nccl-2.30.7-sm90/lib 8 \
  all_gather reduce_scatter alltoall broadcast reduce gather scatter
python3 perf/side_by_side.py /tmp/tuned > "$OUT/side_by_side_tuned.md" 2>&1
tar czf "$OUT/timer_tuned.tgz" -C /tmp tuned
cat "$OUT/side_by_side_tuned.md"; echo "total ${SECONDS}s"
