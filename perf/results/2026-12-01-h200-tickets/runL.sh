# Device run L (session 6): graph record node with moving edges. Timer: before / s5 / ours, 4 passes
# interleaved, 8 B-128 KB, 500 iterations; the C ordering check at 2/4/8; then run K (failure contract).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
mkdir -p "$OUT/timer"
for pass in a b c; do
  for lib in 1_before 2_s5 3_ours; do
    case $lib in 1_before) dir=$kit/before ;; 2_s5) dir=$kit/s5 ;; *) dir=$PWD/mscclpp_nccl/lib ;; esac
    LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 131072 4 500 > "$OUT/timer/${lib}_$pass.txt" 2>&1 || echo "timer $lib $pass failed"
  done
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
for n in 2 4 8; do
  MSCCLPP_NCCL_WAIT_TIMEOUT=20 LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_$n.log" 2>&1
  echo "stream_order n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_$n.log") $(grep -m1 FAIL "$OUT/soc_$n.log" | cut -c1-160)"
done
bash .devkit/runK.sh
cat "$OUT/timer_summary.md"
