#!/usr/bin/env bash
# Times ours and stock NCCL side by side with perf/nccl_timer, in one command on the GPU machine (ranks
# share the GPU under MPS; stock with the settings its README asks for). Then:
#   python perf/side_by_side.py OUTDIR
# Usage: perf/side_by_side.sh OUTDIR STOCK_LIBDIR "RANKS..." COLLECTIVE...   (8 B-256 MB, factor 2)
# e.g.   perf/side_by_side.sh /tmp/out /tmp/stock/nccl-2.30.7-sm90/lib "2 4 8" all_reduce all_gather
set -u
out=${1:?usage: perf/side_by_side.sh OUTDIR STOCK_LIBDIR "RANKS..." COLLECTIVE...}
stock=${2:?stock library directory}
ranks=${3:?rank counts}
shift 3
mkdir -p "$out" build
bash perf/build_timer.sh || exit 1
collectives=$(IFS=,; echo "$*")
for n in $ranks; do
  caps=()  # stock hangs at more than 2 ranks per GPU without a cap on its blocks
  [ "$n" -gt 2 ] && caps=(NCCL_MAX_CTAS=$((32 / n)))
  bash perf/time_split.sh "$out" stock "$stock" "$n" "$collectives" 8 268435456 NCCL_MULTI_RANK_GPU_ENABLE=1 \
    NCCL_NVLS_ENABLE=0 "${caps[@]}"
  bash perf/time_split.sh "$out" ours "$PWD/mscclpp_nccl/lib" "$n" "$collectives" 8 268435456
done
