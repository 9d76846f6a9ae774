# Device run M (session 6): eager small all_reduce, 5 interleaved passes: before (1cc9150), ours, and ours
# with tickets off (an event per call, the session-5 scheme with the moving record node); which algorithm
# 128 KB takes; the PyTorch peer-death tests again.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
mkdir -p "$OUT/timer"
for pass in a b c d e; do
  for lib in 1_before 2_notickets 3_ours; do
    case $lib in 1_before) dir=$kit/before ;; 2_notickets) dir=$kit/notickets ;; *) dir=$PWD/mscclpp_nccl/lib ;; esac
    LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 131072 4 500 > "$OUT/timer/${lib}_$pass.txt" 2>&1 || echo "timer $lib $pass failed"
  done
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
for lib in before ours; do
  dir=$PWD/mscclpp_nccl/lib; [ $lib = before ] && dir=$kit/before
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 131072 131072 2 50 > "$OUT/tuning_$lib.log" 2>&1
  echo "$lib 128KB: $(grep -m1 -i "131072 bytes" "$OUT/tuning_$lib.log" | cut -c1-200)"
done
MSCCLPP_NCCL_EARLY_LAUNCH=0 LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 32768 131072 4 500 > "$OUT/ours_noearly.txt" 2>&1
LD_LIBRARY_PATH=$kit/before MSCCLPP_NCCL_EARLY_LAUNCH=0 timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 32768 131072 4 500 > "$OUT/before_noearly.txt" 2>&1
echo "no early launch, ours:"; grep "^\[0\] *[0-9]" "$OUT/ours_noearly.txt"
echo "no early launch, before:"; grep "^\[0\] *[0-9]" "$OUT/before_noearly.txt"
timeout 200 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_apps_gpu.py -k "peer_death" > "$OUT/peer_death.log" 2>&1
echo "peer_death rc=$?: $(grep -E 'passed|failed' "$OUT/peer_death.log" | tail -1)"
grep -E "RESULT" "$OUT/peer_death.log" | sed 's/^.*RESULT/RESULT/' | head -20
tar czf "$OUT/timer.tgz" -C "$OUT" timer && rm -rf "$OUT/timer"
cat "$OUT/timer_summary.md"
