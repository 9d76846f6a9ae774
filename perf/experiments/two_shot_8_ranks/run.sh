#!/usr/bin/env bash
# The two_shot_8_ranks experiment (README.md beside this file), on the GPU machine, from the repository
# root, carrying mscclpp_nccl/lib and .devkit:  bash perf/experiments/two_shot_8_ranks/run.sh
# About 5 minutes (SKIP_BENCH=1: only the library part, about 3). Summary in $OUT/two_shot_8_ranks.txt, logs in $OUT/two_shot_8_ranks.tgz.
logs=/tmp/two_shot_8_ranks
source perf/device_preamble.sh
lib=$PWD/mscclpp_nccl/lib C=$logs/C && mkdir -p "$C"
started=$SECONDS
# 1. The packet bench under the library's conditions, one at a time: 1024-packet slots, grids of up to 8
#    blocks launched early, tickets. Two-shot all-reduce and reduce on 2, 8 and 16 blocks, 16 KB-256 KB.
[ "${SKIP_BENCH:-0}" = 1 ] || bash perf/build_packet_bench.sh build/packet_kernel_bench > "$logs/bench_build.log" 2>&1
[ "${SKIP_BENCH:-0}" = 1 ] || for cond in plain BENCH_SLOT_PACKETS=1024 BENCH_EARLY_BLOCKS=8 BENCH_TICKET=1 \
  "BENCH_SLOT_PACKETS=1024 BENCH_EARLY_BLOCKS=8 BENCH_TICKET=1"; do
  for blocks in 2 8 16; do
    tag=$(echo "$cond" | tr ' =' '_-')_$blocks
    env ${cond/plain/} timeout 60 build/packet_kernel_bench 8 16384 262144 "$blocks" \
      all_reduce,all_reduce_two_shot,reduce,reduce_two_shot > "$C/bench_$tag.txt" 2>&1 || echo "bench $tag failed"
  done
done
echo "bench: $((SECONDS - started))s"
# 2. The library at 8 ranks, 16 KB-1 MB: the table, the one-shot schedules forced on 16 blocks, the two-shot
#    ones on 8 and 16, and the table without early launch. (Session 20's first run lacked the timer's build.)
bash perf/build_timer.sh || exit 1
bash perf/time_split.sh "$C" table "$lib" 8 reduce,all_reduce 16384 1048576
bash perf/time_split.sh "$C" no_early "$lib" 8 reduce,all_reduce 16384 1048576 MSCCLPP_NCCL_EARLY_LAUNCH=0
for cfg in reduce=exchange_packet/8 reduce=exchange_packet/16 reduce=reduce_two_shot_packet/8 reduce=reduce_two_shot_packet/16 \
  all_reduce=allreduce_one_shot_packet/16 all_reduce=allreduce_two_shot_packet/8 \
  all_reduce=allreduce_two_shot_packet/16; do
  label=$(echo "${cfg#*=}" | tr / _)
  bash perf/time_split.sh "$C" "$label" "$lib" 8 "${cfg%%=*}" 16384 1048576 MSCCLPP_NCCL_ALGO=$cfg
done
echo "library: $((SECONDS - started))s"
{
  for f in "$C"/bench_*.txt; do
    printf "%-60s %s\n" "$(basename "$f" .txt)" "$(awk '!/^#/ && NF == 3 {printf "%s/%dK:%s ", $1, $2 / 1024, $3}' "$f")"
  done
  for f in "$C"/*_8.txt; do
    case $(basename "$f") in bench_*) continue ;; esac
    printf "%-44s %s\n" "$(basename "$f" .txt)" \
      "$(awk '!/^#/ {printf "%dK:%s/%s ", $1 / 1024, $3, $2}' "$f")"
  done
} | tee "$OUT/two_shot_8_ranks.txt"
pack_logs
