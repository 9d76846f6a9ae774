# Device run H: the C ordering check with our library on the loader path (runG forgot it), and DDP at
# 2 ranks three times with a SIGSEGV backtrace printer, to find the exit-time crash seen once in runG.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p build
nvcc -O2 -I shim -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
for n in 4 8; do
  MSCCLPP_NCCL_WAIT_TIMEOUT=20 LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- build/stream_order_check > "$OUT/soc_ours_$n.log" 2>&1
  echo "stream_order ours n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_ours_$n.log") $(grep -m1 FAIL "$OUT/soc_ours_$n.log" | cut -c1-160)"
done
for i in 1 2 3; do
  PYTHONPATH=$PWD:${PYTHONPATH:-} timeout 60 python3 -m mscclpp_nccl.run -n 2 --mps --timeout 55 -- env LD_PRELOAD="$PWD/mscclpp_nccl/lib/libnccl.so.2 $kit/segv.so" PYTHONFAULTHANDLER=1 python3 tests/apps/ddp_worker.py > "$OUT/ddp_$i.log" 2>&1
  echo "ddp try $i rc=$? passes=$(grep -c 'PASS ddp_fp32' "$OUT/ddp_$i.log")"
  grep -E "libnccl|segv|Fatal|Segmentation|File \"|exit" "$OUT/ddp_$i.log" | grep -v "PASS" | head -20
done
