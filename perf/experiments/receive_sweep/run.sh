#!/usr/bin/env bash
# The receive-sweep experiment (README.md beside this file), on the GPU machine, from the repository root:
#   bash perf/experiments/receive_sweep/run.sh OUTDIR [VARIANT...]
# A VARIANT is NAME=SWEEP[+one_peer][+no_bounds]: perf/packet_kernel_bench.cu built on the kernels with
# receive_sweep.patch at SWEEP senders a sweep (0: the kernels as they are), plus one_peer.patch, or
# without the two-blocks-an-SM launch bound. Default (run 1): baseline=0 sweep8=8 sweep4=4; every run
# has the baseline. Each build is timed, the builds interleaved and twice each: every collective at 2, 4
# and 8 ranks, 8 B-4 KB on one block; and at 8 ranks the schedules of its mid sizes (one- and two-shot
# all-reduce and reduce, reduce_scatter, all_gather) at 16 KB-256 KB on 2, 8 and 16 blocks (not 16 without
# the bound: 256 blocks of more than 64 registers do not fit at once). Each bench checks its outputs and
# exits 1 on a wrong one. Last, perf/packet_bench_compare.py's table.
set -u
here=perf/experiments/receive_sweep
out=${1:?usage: run.sh OUTDIR [VARIANT...]}
shift
mkdir -p "$out"
specs=("$@")
[ $# -gt 0 ] || specs=(sweep8=8 sweep4=4)
specs=(baseline=0 "${specs[@]}")
build() {  # NAME=SPEC: a copy of native/ as the spec says, and the bench on it
  local name=${1%%=*} spec=${1#*=} dir=/tmp/receive_sweep_src/${1%%=*}
  local sweep=${spec%%+*}
  rm -rf "$dir" && mkdir -p "$dir" && cp -r native "$dir/"
  if [ "$sweep" != 0 ]; then
    patch -s -d "$dir" -p1 < "$here/receive_sweep.patch" || return 1
    sed -i "s/kSweepRanks = 8/kSweepRanks = $sweep/" "$dir/native/algorithms/packet_kernel.cuh"
  fi
  case $spec in *+one_peer*) patch -s -d "$dir" -p1 < "$here/one_peer.patch" || return 1 ;; esac
  case $spec in *+no_bounds*)
    sed -i 's/__launch_bounds__(kPacketThreads, kPacketBlocksPerSm)/__launch_bounds__(kPacketThreads)/' \
      "$dir"/native/algorithms/*.cu ;;
  esac
  bash perf/build_packet_bench.sh "$out/bench_$name" "$dir" > "$out/build_$name.log" 2>&1
}
for spec in "${specs[@]}"; do build "$spec" & done
wait
bench() {  # TAG RANKS MIN MAX BLOCKS [COLLECTIVES]: every build, into NAME_RANKS_TAG.txt
  local tag=$1 n=$2 spec name
  shift 2
  for spec in "${specs[@]}"; do
    name=${spec%%=*}
    [ -x "$out/bench_$name" ] || continue
    case "$spec/$tag" in *no_bounds*/mid16*) continue ;; esac
    timeout 120 "$out/bench_$name" "$n" "$@" > "$out/${name}_${n}_$tag.txt" 2>&1 ||
      echo "$name at $n ranks ($tag) failed: $(tail -2 "$out/${name}_${n}_$tag.txt")"
  done
}
for spec in "${specs[@]}"; do
  [ -x "$out/bench_${spec%%=*}" ] || echo "build ${spec%%=*} failed: $(tail -3 "$out/build_${spec%%=*}.log")"
done
mid=all_reduce,all_reduce_two_shot,reduce,reduce_two_shot,reduce_scatter,all_gather
for repeat in 1 2; do
  for n in 2 4 8; do bench "small$repeat" "$n" 8 4096 1; done
  for blocks in 2 8 16; do bench "mid${blocks}x$repeat" 8 16384 262144 "$blocks" "$mid"; done
done
python3 perf/packet_bench_compare.py "$out"
