# Device run 3 (session 11): with early launch now up to half of a rank's share (16 blocks at 4 ranks, 32
# at 2, 8 at 8), would smaller packet grids win at 16 KB-4 MB, eager and in graphs? Ours only, the
# shipped table against forced grids (perf/nccl_timer, eight collectives per launch). One file per
# config, collective and rank count: CONFIG_COLLECTIVE_N.txt in $OUT/grids.tgz.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=30 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json
mkdir -p build && nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
dir=/tmp/grids && mkdir -p $dir
colls=all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce,gather,scatter
one() {  # config ranks [MSCCLPP_NCCL_ALGO]
  local config=$1 n=$2 algo=${3:-} log=$dir/$1_$2.log
  env ${algo:+MSCCLPP_NCCL_ALGO=$algo} LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 90 \
    python3 -m mscclpp_nccl.run -n "$n" --mps --timeout 80 -- build/nccl_timer "$colls" 16384 4194304 2 20 > "$log" 2>&1 ||
    echo "$config at $n ranks failed"
  awk -v dir="$dir" -v c="$config" -v n="$n" '!sub(/^\[0\] /, "") { next }
    /^# nccl_timer: / { file = dir "/" c "_" $3 "_" n ".txt" } file { print > file }' "$log"
}
for n in 2 4 8; do
  share=$((132 / n / 2)); [ $share -gt 32 ] && share=32
  half=$((share / 2))
  one table $n
  one grid$share $n "exchange_packet/$share,all_reduce=allreduce_two_shot_packet/$share"
  one grid$half $n "exchange_packet/$half,all_reduce=allreduce_two_shot_packet/$half"
  one oneshot$share $n "all_reduce=allreduce_one_shot_packet/$share"
done
tar -czf "$OUT/grids.tgz" -C $dir .
python3 perf/compare_configs.py $dir > "$OUT/compare.md" 2>&1
cat "$OUT/compare.md"
