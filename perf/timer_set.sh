#!/usr/bin/env bash
# Times the set perf/targets.py reads with perf/nccl_timer.cu (C, nccl-tests timing, eager and CUDA
# graph), ranks sharing the GPU under MPS: every collective at 4 ranks, all_reduce at 2 and 8 ranks.
# Usage: perf/timer_set.sh OUTDIR [LIBDIR]   (LIBDIR: the libnccl.so.2 to time; default: ours)
# Then:  python perf/timer_summary.py OUTDIR
set -u
out=${1:?usage: perf/timer_set.sh OUTDIR [LIBDIR]}
lib=${2:-$PWD/mscclpp_nccl/lib}
mkdir -p "$out" build
bash perf/build_timer.sh || exit 1
time_one() {  # ranks collective max_bytes
  LD_LIBRARY_PATH=$lib timeout "${TIMER_TIMEOUT:-100}" python -m mscclpp_nccl.run -n "$1" --mps \
    --timeout "${TIMER_TIMEOUT:-100}" -- build/nccl_timer "$2" 8 "$3" 4 >"$out/$2_$1.txt" 2>&1
  echo "== $2 at $1 ranks: exit $?"
}
time_one 4 all_reduce 134217728
for coll in all_gather reduce_scatter alltoall broadcast sendrecv; do time_one 4 "$coll" 33554432; done
time_one 2 all_reduce 134217728
time_one 8 all_reduce 134217728
