#!/usr/bin/env bash
# The 8-rank table experiment (README.md beside this file), on the GPU machine, from the repository root,
# after sourcing perf/device_preamble.sh:  bash perf/experiments/table_8_ranks/run.sh OUTDIR
# Ours only: the shipped table against packet grids forced to 16 and 8 blocks, every exchange collective
# and the all-reduce at 8 ranks, 16 KB-4 MB; then perf/compare_configs.py's table of where a forced grid
# wins by more than 5%.
set -u
out=${1:?usage: run.sh OUTDIR}
mkdir -p "$out" build
bash perf/build_timer.sh || exit 1
collectives=all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce,gather,scatter
one() {  # CONFIG [MSCCLPP_NCCL_ALGO]: one timer launch, one CONFIG_COLLECTIVE_8.txt per collective
  TIMER_TIMEOUT=120 bash perf/time_split.sh "$out" "$1" "$PWD/mscclpp_nccl/lib" 8 "$collectives" 16384 4194304 \
    ${2:+MSCCLPP_NCCL_ALGO=$2}
}
one table
one grid16 "exchange_packet/16,all_reduce=allreduce_two_shot_packet/16"
one grid8 "exchange_packet/8,all_reduce=allreduce_two_shot_packet/8"
python3 perf/compare_configs.py "$out"
