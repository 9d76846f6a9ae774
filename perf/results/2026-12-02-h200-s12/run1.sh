# Device run 1 (session 12): where the reduce-to-one pattern (reduce, reduce_scatter) loses bandwidth.
# perf/reduce_loop_bench.cu's schedules in one process; the library's reduce at 2 ranks and
# reduce_scatter at 4, zero-copy on and off, against stock; the path the selector logs.
set -u
kit=$PWD/.devkit
logs=/tmp/run1_logs && mkdir -p $logs
source "$kit/device/prepare.sh" > "$logs/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
mkdir -p build /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
stock=/tmp/stock/nccl-2.30.7-sm90/lib
nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -gencode arch=compute_90,code=sm_90 -o build/reduce_loop_bench perf/reduce_loop_bench.cu
timeout 120 build/reduce_loop_bench 32 > $logs/bench.txt 2>&1
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2
t() {  # name lib ranks collective min max [env...]
  local name=$1 lib=$2 n=$3 coll=$4 lo=$5 hi=$6; shift 6
  env "$@" LD_LIBRARY_PATH=$lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- \
    build/nccl_timer $coll $lo $hi 4 > $logs/${name}_${coll}_$n.txt 2>&1
}
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
t ours mscclpp_nccl/lib 2 reduce 2097152 268435456
t copyoff mscclpp_nccl/lib 2 reduce 2097152 268435456 MSCCLPP_NCCL_ZERO_COPY=0
t stock $stock 2 reduce 2097152 268435456 NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0
t ours mscclpp_nccl/lib 4 reduce_scatter 2097152 134217728
t copyoff mscclpp_nccl/lib 4 reduce_scatter 2097152 134217728 MSCCLPP_NCCL_ZERO_COPY=0
t ours mscclpp_nccl/lib 2 all_reduce 33554432 268435456
t log mscclpp_nccl/lib 2 reduce 268435456 268435456 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING
tar -czf "$OUT/logs.tgz" -C "$logs" .
cat $logs/bench.txt
for f in $logs/ours_* $logs/copyoff_* $logs/stock_*; do echo "== $(basename $f)"; grep -v "^#" $f | tail -8; done
grep -m3 "zero-copy\|reduce 268435456" $logs/log_reduce_2.txt
