#!/usr/bin/env bash
# The exchange-latency experiment (README.md beside this file), on the GPU machine, from the repository
# root:  bash perf/experiments/exchange_latency/run.sh OUTDIR [PATCH...]
# Builds perf/packet_kernel_bench.cu against the kernels as they are (baseline) and with each patch named
# (default: every patch here, and all of them together), then runs every build at 2, 4 and 8 ranks,
# twice, interleaved, 8 B-4 KB on one block; last, the table of perf/packet_bench_compare.py. Each bench
# checks its outputs and exits 1 on a wrong one.
set -u
here=perf/experiments/exchange_latency
out=${1:?usage: run.sh OUTDIR}
mkdir -p "$out"
build() {  # NAME PATCH...: a copy of native/ with the patches applied, and the bench built on it
  local name=$1 dir=/tmp/exchange_latency_src/$1
  shift
  rm -rf "$dir" && mkdir -p "$dir" && cp -r native "$dir/"
  for patch in "$@"; do patch -s -d "$dir" -p1 < "$here/$patch.patch" || return 1; done
  bash perf/build_packet_bench.sh "$out/bench_$name" "$dir" > "$out/build_$name.log" 2>&1
}
shift
patches=("$@")
[ $# -gt 0 ] || patches=(self_copy_last store_no_clobber receive_any_order)
variants=(baseline "${patches[@]}")
build baseline &
for patch in "${patches[@]}"; do build "$patch" "$patch" & done
if [ $# -eq 0 ]; then
  variants+=(all)
  build all "${patches[@]}" &
fi
wait
for name in "${variants[@]}"; do [ -x "$out/bench_$name" ] || echo "build $name failed: $(tail -3 "$out/build_$name.log")"; done
for n in 2 4 8; do
  for repeat in 1 2; do
    for name in "${variants[@]}"; do
      [ -x "$out/bench_$name" ] || continue
      timeout 120 "$out/bench_$name" "$n" 8 4096 1 > "$out/${name}_${n}_$repeat.txt" 2>&1 ||
        echo "$name at $n ranks failed: $(tail -2 "$out/${name}_${n}_$repeat.txt")"
    done
  done
done
python3 perf/packet_bench_compare.py "$out"
