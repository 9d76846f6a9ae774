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
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
time_one() {  # label libdir ranks collective [env...]
  local label=$1 lib=$2 n=$3 coll=$4
  shift 4
  env "$@" LD_LIBRARY_PATH="$lib" timeout "${TIMER_TIMEOUT:-120}" python3 -m mscclpp_nccl.run -n "$n" --mps \
    --timeout "${TIMER_TIMEOUT:-120}" -- build/nccl_timer "$coll" 8 268435456 2 20 \
    >"$out/${label}_${coll}_$n.txt" 2>&1 || echo "timer $label $coll at $n ranks failed"
}
for n in $ranks; do
  for coll in "$@"; do
    caps=()  # stock hangs at more than 2 ranks per GPU without a cap on its blocks
    [ "$n" -gt 2 ] && caps=(NCCL_MAX_CTAS=$((32 / n)))
    time_one stock "$stock" "$n" "$coll" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 "${caps[@]}"
    time_one ours "$PWD/mscclpp_nccl/lib" "$n" "$coll"
  done
done
