# Device run 4 (session 17): reduce at 8 ranks, 128-512 KB, where run 3 had its one point under 1.1x
# (256 KB eager, 1.07x): the shipped table (packets to 128 KB, then the two-shot schedule) against the
# packet exchange forced with 16 and 32 blocks.
logs=/tmp/s17_run4
source perf/device_preamble.sh
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
for algo in table exchange_packet/16 exchange_packet/32; do
  extra=() && [ $algo != table ] && extra=(MSCCLPP_NCCL_ALGO=reduce=$algo)
  name=${algo//\//_}
  env "${extra[@]}" LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 40 python3 -m mscclpp_nccl.run -n 8 --mps \
    --timeout 35 -- build/nccl_timer reduce 131072 524288 2 20 > "$logs/reduce_$name.log" 2>&1 || echo "$algo failed"
  echo "== $algo" && grep -h "^\[0\] " "$logs/reduce_$name.log" | tail -3
done | tee "$OUT/reduce_8.txt"
