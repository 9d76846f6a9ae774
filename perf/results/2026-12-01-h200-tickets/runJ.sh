# Device run J (session 6): device tickets instead of an event per eager call. The C timer against the
# pre-ordering library (before) and the session-5 library (s5), twice, interleaved; the C ordering check at
# 2/4/8; the PyTorch applications (FSDP2 2/4/8, DDP 2 three times with a SIGSEGV printer, TP and pipeline 4).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
mkdir -p "$OUT/timer"
for pass in a b; do
  for lib in 1_before 2_s5 3_ours; do
    case $lib in 1_before) dir=$kit/before ;; 2_s5) dir=$kit/s5 ;; *) dir=$PWD/mscclpp_nccl/lib ;; esac
    LD_LIBRARY_PATH=$dir timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- build/nccl_timer all_reduce 8 1048576 4 200 > "$OUT/timer/${lib}_$pass.txt" 2>&1 || echo "timer $lib $pass failed"
  done
done
python3 perf/timer_summary.py "$OUT/timer" > "$OUT/timer_summary.md" 2>&1
for n in 2 4 8; do
  MSCCLPP_NCCL_WAIT_TIMEOUT=20 LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_$n.log" 2>&1
  echo "stream_order n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_$n.log") $(grep -m1 FAIL "$OUT/soc_$n.log" | cut -c1-160)"
done
timeout 260 python3 -m pytest -q -rA -p no:cacheprovider tests/test_apps_gpu.py -k "test_app and (fsdp2 or tp-4 or pipeline-4)" > "$OUT/apps.log" 2>&1
echo "apps rc=$?: $(grep -E 'passed|failed' "$OUT/apps.log" | tail -1)"
grep -h "RESULT" "$OUT/apps.log" | sed 's/^.*RESULT/RESULT/' | sort -u
for i in 1 2 3; do
  LD_PRELOAD=$kit/segv.so PYTHONFAULTHANDLER=1 timeout 45 python3 -m pytest -q -rA -p no:cacheprovider tests/test_apps_gpu.py -k "test_app and ddp-2" > "$OUT/ddp_$i.log" 2>&1
  echo "ddp-2 try $i rc=$?: $(grep -E 'passed|failed' "$OUT/ddp_$i.log" | tail -1)"
  grep -E "libnccl.so.2\(|segv.so|Fatal Python|exit code" "$OUT/ddp_$i.log" | head -8
done
cat "$OUT/timer_summary.md"
