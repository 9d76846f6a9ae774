# Device run 1 (session 21): the two prepared, unrun measurements of session 20, no library needed.
# ticket_publish's one_block.patch (a one-block grid publishes its ticket without the blocks' count), and
# perf/launch_cost_bench.cu with the driver's launch and the host cost of the library's other CUDA calls,
# alone and 4 or 8 processes at once under MPS.
logs=/tmp/s21_run1
source perf/device_preamble.sh
nvcc -O2 -arch=sm_90 -I. -o build/launch_cost_bench perf/launch_cost_bench.cu || exit 1
timeout 60 build/launch_cost_bench > "$logs/alone.txt" 2>&1
for n in 4 8; do
  for i in $(seq "$n"); do timeout 60 build/launch_cost_bench > "$logs/at_once_${n}_$i.txt" 2>&1 & done
  wait
done
timeout 400 bash perf/experiments/ticket_publish/run.sh "$logs/ticket_publish" one_block.patch > "$logs/ticket_publish.txt" 2>&1
for f in alone at_once_4_1 at_once_8_1; do echo "== $f"; sed -n '/^pass 1/,$p' "$logs/$f.txt"; done | tee "$OUT/launch_cost.txt"
tail -40 "$logs/ticket_publish.txt" | tee "$OUT/ticket_publish.txt"
pack_logs
