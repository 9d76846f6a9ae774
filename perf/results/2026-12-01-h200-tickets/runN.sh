# Device run N (session 6): the exit-time SIGSEGV after a peer's death (backtraces), and eager small
# all_reduce with the same tuning table for all three libraries (before, tickets off, ours).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
for i in 1 2 3; do
  LD_PRELOAD=$kit/segv.so PYTHONFAULTHANDLER=1 timeout 100 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_apps_gpu.py -k "peer_death and 0-2" > "$OUT/peer_death_$i.log" 2>&1
  echo "peer_death 0-2 try $i rc=$?: $(grep -E 'passed|failed' "$OUT/peer_death_$i.log" | tail -1)"
  grep -E "exited with code|libnccl.so.2\(|segv|Fatal Python|\(0x|File \"" "$OUT/peer_death_$i.log" | grep -v "^E  *\[.\] frame" | head -40
done
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p "$OUT/timer"
for pass in a b c d; do
  for lib in 1_before 2_notickets 3_ours; do
    case $lib in 1_before) dir=$kit/before ;; 2_notickets) dir=$kit/notickets ;; *) dir=$PWD/mscclpp_nccl/lib ;; esac
    LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 131072 4 500 > "$OUT/timer/${lib}_$pass.txt" 2>&1 || echo "timer $lib $pass failed"
  done
done
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$kit/before timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 131072 4 20 > "$OUT/tuning_before.log" 2>&1
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 131072 4 20 > "$OUT/tuning_ours.log" 2>&1
for lib in before ours; do echo "$lib:"; grep "^\[0\].*all_reduce" "$OUT/tuning_$lib.log" | sed 's/.*all_reduce/all_reduce/' | sort -u -t' ' -k2,2n | head -9; done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
tar czf "$OUT/timer.tgz" -C "$OUT" timer && rm -rf "$OUT/timer"
cat "$OUT/timer_summary.md"
