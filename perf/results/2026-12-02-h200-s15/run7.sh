# Device run 7 (session 15): does the exchange kernel's generality cost the 0.7-1.3 us by which all_gather
# trails the one-shot all-reduce? perf/packet_kernel_bench with its all_gather_lean yardstick (the
# all_gather on the all-reduce's schedule), 2, 4 and 8 ranks, twice, one block, 8 B-4 KB.
logs=/tmp/s15_run7
source perf/device_preamble.sh
nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -arch=sm_90 -o build/packet_kernel_bench \
  perf/packet_kernel_bench.cu native/algorithms/exchange_packet.cu native/algorithms/allreduce_one_shot_packet.cu \
  native/algorithms/kernel_launch.cc native/algorithms/launch_record.cc native/collective_plans.cc \
  native/common/logging.cc native/common/env.cc > "$logs/build.log" 2>&1 || { tail -5 "$logs/build.log"; exit 1; }
for n in 2 4 8; do
  for repeat in 1 2; do
    timeout 120 build/packet_kernel_bench $n 8 4096 1 > "$logs/bench_${n}_$repeat.txt" 2>&1 ||
      echo "bench at $n ranks failed: $(tail -2 "$logs/bench_${n}_$repeat.txt")"
  done
done
pack_logs
for n in 2 4 8; do
  echo "== $n ranks (graph us, repeat 1 | repeat 2)"
  for c in all_reduce all_gather all_gather_lean broadcast; do
    echo "$c: $(awk -v c=$c '$1==c{printf "%s ", $3}' "$logs/bench_${n}_1.txt")| $(awk -v c=$c '$1==c{printf "%s ", $3}' "$logs/bench_${n}_2.txt")"
  done
done
