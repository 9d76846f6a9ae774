#!/usr/bin/env bash
# Runs the benchmark set that perf/README.md reports: bf16, 8 B to 32 MB (x4), ranks sharing the
# GPUs present under MPS, nccl-tests timing (host wall time over 20 calls after 5 warm-ups), and
# again captured in a CUDA graph. Usage: perf/collect.sh OUTDIR [NAME ...]
set -u
out=${1:?usage: perf/collect.sh OUTDIR [NAME ...]}
shift
mkdir -p "$out/json"
common=(-b 8 -e 32M -f 4 -d bfloat16 -n 20 -w 5 -c 1)
declare -A runs=(
  [all_reduce_2]="all_reduce -N 2"
  [all_reduce_4]="all_reduce -N 4"
  [all_reduce_4_graph]="all_reduce -N 4 -G 10"
  [all_reduce_8]="all_reduce -N 8"
  [all_gather_4]="all_gather -N 4"
  [reduce_scatter_4]="reduce_scatter -N 4"
  [alltoall_4]="alltoall -N 4"
  [broadcast_4]="broadcast -N 4"
  [sendrecv_4]="sendrecv -N 4"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(all_reduce_2 all_reduce_4 all_reduce_4_graph all_reduce_8 all_gather_4
  reduce_scatter_4 alltoall_4 broadcast_4 sendrecv_4)
for name in "${names[@]}"; do
  # shellcheck disable=SC2086
  timeout "${BENCH_TIMEOUT:-90}" python -m mscclpp_nccl.bench ${runs[$name]} "${common[@]}" \
    -J "$out/json/$name.json" >"$out/$name.txt" 2>&1
  echo "== $name: exit $? ($(date -u +%FT%TZ))" | tee -a "$out/bench.log"
  cat "$out/$name.txt" >>"$out/bench.log"
done
