#!/usr/bin/env bash
# The ticket_publish experiment (README.md beside this file), on the GPU machine, from the repository root:
#   bash perf/experiments/ticket_publish/run.sh OUTDIR [PATCH...]
# perf/packet_kernel_bench.cu built on copies of native/: as it is (baseline), and with each PATCH of this
# folder (named for it; default, session 20's run 3: release.patch fold.patch); every call publishes a
# ticket (BENCH_TICKET=1), as eager calls do,
# and the baseline runs once more without (noticket): the ticket's whole cost. Each build is timed twice,
# interleaved: every collective at 2, 4 and 8 ranks, 8 B-4 KB on one block; at 8 ranks the reductions and
# exchanges of the mid sizes, 16 KB-256 KB on 16 blocks. Each bench checks its outputs and exits 1 on a
# wrong one. Last, perf/packet_bench_compare.py's table. About 4 minutes.
set -u
here=perf/experiments/ticket_publish
out=${1:?usage: run.sh OUTDIR [PATCH...]}
shift
patches=("$@")
[ $# -gt 0 ] || patches=(release.patch fold.patch)
mkdir -p "$out"
build() {  # NAME [PATCH]: a copy of native/ with PATCH applied, and the bench on it
  local dir=/tmp/ticket_publish_src/$1
  rm -rf "$dir" && mkdir -p "$dir" && cp -r native "$dir/"
  [ $# -lt 2 ] || patch -s -d "$dir" -p1 < "$here/$2" || return 1
  bash perf/build_packet_bench.sh "$out/bench_$1" "$dir" > "$out/build_$1.log" 2>&1
}
builds=(baseline)
runs=(baseline:baseline:1 noticket:baseline:0)  # NAME:BUILD:TICKET
build baseline &
for p in "${patches[@]}"; do
  builds+=("${p%.patch}") runs+=("${p%.patch}:${p%.patch}:1")
  build "${p%.patch}" "$p" &
done
wait
bench() {  # TAG RANKS MIN MAX BLOCKS [COLLECTIVES]: every run, into NAME_RANKS_TAG.txt
  local tag=$1 n=$2 run name binary
  shift 2
  for run in "${runs[@]}"; do
    IFS=: read -r name binary ticket <<< "$run"
    [ -x "$out/bench_$binary" ] || continue
    BENCH_TICKET=$ticket timeout 120 "$out/bench_$binary" "$n" "$@" > "$out/${name}_${n}_$tag.txt" 2>&1 ||
      echo "$name at $n ranks ($tag) failed: $(tail -2 "$out/${name}_${n}_$tag.txt")"
  done
}
for b in "${builds[@]}"; do
  [ -x "$out/bench_$b" ] || echo "build $b failed: $(tail -3 "$out/build_$b.log")"
done
mid=all_reduce,all_reduce_two_shot,reduce,reduce_two_shot,reduce_scatter,all_gather
for repeat in 1 2; do
  for n in 2 4 8; do bench "small$repeat" "$n" 8 4096 1; done
  bench "mid16x$repeat" 8 16384 262144 16 "$mid"
done
python3 perf/packet_bench_compare.py "$out"
rm -f "$out"/bench_*  # the binaries stay out of the logs
