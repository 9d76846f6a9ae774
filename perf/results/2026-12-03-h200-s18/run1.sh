# Device run 1 (session 18): where the 4-rank mid sizes lose.
# A. all_gather, reduce_scatter, alltoall at 2-16 MB: the shipped table (all_gather on packets up to 2 MB
#    ranges, so its 8 MB call is never mapped) against a table whose packets stop at 1 MB ranges (8 MB
#    then maps), and that table with mapping off (the chunked exchange alone). One log with the tuning
#    lines says whether the mapped calls ran zero-copy ("ready").
# B. broadcast, reduce, gather, scatter at 512 KB-8 MB: the table against forced packets (32 blocks),
#    chunked exchanges in 32 KB chunks, and (reduce) the two-shot packet schedule.
# C. session 17's run 4: 8-rank reduce at 128-512 KB, the table against packets on 16 and 32 blocks.
logs=/tmp/s18_run1
source perf/device_preamble.sh
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
lib=$PWD/mscclpp_nccl/lib
python3 - "$MSCCLPP_NCCL_TUNING_FILE" "$logs/packets_1m.json" <<'PY'
import json, sys
table = json.load(open(sys.argv[1]))
for entry in table["entries"]:
    if entry["nranks"] == 4 and entry["collective"] == "all_gather":
        for rule in entry["rules"]:
            if rule["max_bytes"] == 2097152:
                rule["max_bytes"] = 1048576
json.dump(table, open(sys.argv[2], "w"), indent=1)
PY
started=$SECONDS
A=$logs/A && mkdir -p $A
bash perf/time_split.sh $A table $lib 4 all_gather,reduce_scatter,alltoall 2097152 16777216
bash perf/time_split.sh $A pk1m $lib 4 all_gather,reduce_scatter,alltoall 2097152 16777216 \
  MSCCLPP_NCCL_TUNING_FILE=$logs/packets_1m.json
bash perf/time_split.sh $A pk1m_nomap $lib 4 all_gather,reduce_scatter,alltoall 2097152 16777216 \
  MSCCLPP_NCCL_TUNING_FILE=$logs/packets_1m.json MSCCLPP_NCCL_ZERO_COPY=0
bash perf/time_split.sh $A pk1m_log $lib 4 all_gather 8388608 8388608 \
  MSCCLPP_NCCL_TUNING_FILE=$logs/packets_1m.json NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING
echo "A: $((SECONDS - started))s; all_gather 8 MB mapped calls by readiness:" \
  "$(grep -o 'mapped, [a-z ]*ready' $A/pk1m_log_all_4.log | sort | uniq -c | tr '\n' ' ')"
B=$logs/B && mkdir -p $B
bash perf/time_split.sh $B table $lib 4 broadcast,reduce,gather,scatter 524288 8388608
for cfg in exchange_packet/32 exchange_chunked/0/0/32768; do
  bash perf/time_split.sh $B ${cfg//\//_} $lib 4 broadcast,reduce,gather,scatter 524288 8388608 MSCCLPP_NCCL_ALGO=$cfg
done
bash perf/time_split.sh $B two_shot $lib 4 reduce 524288 8388608 MSCCLPP_NCCL_ALGO=reduce=reduce_two_shot_packet
echo "B: $((SECONDS - started))s"
C=$logs/C && mkdir -p $C
bash perf/time_split.sh $C table $lib 8 reduce 131072 524288
for cfg in exchange_packet/16 exchange_packet/32; do
  bash perf/time_split.sh $C ${cfg//\//_} $lib 8 reduce 131072 524288 MSCCLPP_NCCL_ALGO=reduce=$cfg
done
echo "C: $((SECONDS - started))s"
for d in A B C; do
  echo "== $d (graph us; eager us)"
  for f in $logs/$d/*_4.txt $logs/$d/*_8.txt; do
    [ -f "$f" ] || continue
    printf "%-44s %s\n" "$(basename $f .txt)" \
      "$(awk '!/^#/ {s = $1 >= 1048576 ? ($1/1048576) "M" : ($1/1024) "K"; printf "%s:%s/%s ", s, $3, $2}' $f)"
  done
done | tee "$OUT/summary.txt"
pack_logs  # (few files come back: the tables are in the tarball)
