# Device run 6 (session 20): why eager small calls at 4 ranks take 5.5-7 us a call against 2.5 in graphs
# and 3.4 of host time (run 5). perf/launch_cost_bench.cu's 2-us kernel, entered and left as the
# library's are, eagerly and in graphs: alone, then 4 and 8 processes at once under MPS.
logs=/tmp/s20_run6
source perf/device_preamble.sh
nvcc -O2 -arch=sm_90 -I. -o build/launch_cost_bench perf/launch_cost_bench.cu || exit 1
timeout 60 build/launch_cost_bench > "$logs/alone.txt" 2>&1
for n in 4 8; do
  for i in $(seq "$n"); do timeout 60 build/launch_cost_bench > "$logs/at_once_${n}_$i.txt" 2>&1 & done
  wait
done
for f in alone at_once_4_1 at_once_8_1; do echo "== $f"; sed -n '/^pass 1/,$p' "$logs/$f.txt"; done | tee "$OUT/launch_cost.txt"
pack_logs
