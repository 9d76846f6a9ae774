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
time_one() {  # label libdir ranks [env...]: every collective in one launch, then one file per collective
  local label=$1 lib=$2 n=$3 log="$out/${1}_all_$3.log"
  shift 3
  env "$@" LD_LIBRARY_PATH="$lib" timeout "${TIMER_TIMEOUT:-300}" python3 -m mscclpp_nccl.run -n "$n" --mps \
    --timeout "${TIMER_TIMEOUT:-300}" -- build/nccl_timer "$collectives" 8 268435456 2 20 >"$log" 2>&1 ||
    echo "timer $label at $n ranks failed (see $log)"
  # Rank 0's lines, less the launcher's "[0] " prefix.
  awk -v dir="$out" -v label="$label" -v n="$n" '
    !sub(/^\[0\] /, "") { next }
    /^# empty kernel launch/ { head = $0; next }
    /^# nccl_timer: / { file = dir "/" label "_" $3 "_" n ".txt"; print head > file }
    file { print > file }' "$log"
}
collectives=$(IFS=,; echo "$*")
for n in $ranks; do
  caps=()  # stock hangs at more than 2 ranks per GPU without a cap on its blocks
  [ "$n" -gt 2 ] && caps=(NCCL_MAX_CTAS=$((32 / n)))
  time_one stock "$stock" "$n" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 "${caps[@]}"
  time_one ours "$PWD/mscclpp_nccl/lib" "$n"
done
