# Device run 5 (session 13): does the early-launch attribute on every launch help? Run 1's bench put a
# plain launch at 8 us of host time with 8 processes launching at once, one with the attribute at 3 us.
# A library of 70b90de built with an experimental switch (attribute.patch, not in the tree; carried as
# build/carry/lib_attr.so.xz): MSCCLPP_NCCL_LAUNCH_ATTRIBUTE=1 launches every kernel with the attribute,
# while only kernels launched early still let their successor start early. Four modes at 4 and 8 ranks:
# default; attribute everywhere (small grids still trigger: safe in this timer only, which drains the
# stream between sizes); attribute everywhere and no early trigger; no early launch at all.
logs=/tmp/s13_run5
source perf/device_preamble.sh
lib=$PWD/build/lib_attr && mkdir -p $lib && xz -dc build/carry/lib_attr.so.xz > $lib/libnccl.so.2
mkdir -p mscclpp_nccl/lib && cp $lib/libnccl.so.2 mscclpp_nccl/lib/  # the launcher loads it for the unique id
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L $lib -l:libnccl.so.2 || exit 1
mode() {  # label ranks [env...]
  local label=$1 n=$2
  shift 2
  env "$@" LD_LIBRARY_PATH=$lib timeout 150 python3 -m mscclpp_nccl.run -n $n --mps --timeout 140 -- \
    build/nccl_timer all_reduce,broadcast,reduce 8 4194304 2 20 > "$logs/${label}_$n.txt" 2>&1 || echo "$label $n failed"
}
for n in 4 8; do
  mode default $n
  mode attr $n MSCCLPP_NCCL_LAUNCH_ATTRIBUTE=1
  mode attr_noearly $n MSCCLPP_NCCL_LAUNCH_ATTRIBUTE=1 MSCCLPP_NCCL_EARLY_LAUNCH=0
  mode noearly $n MSCCLPP_NCCL_EARLY_LAUNCH=0
done
pack_logs
for n in 4 8; do
  echo "== $n ranks: bytes, then eager/graph/host for default | attr | attr_noearly | noearly"
  paste <(grep -E "^\[0\] (#|  )" $logs/default_$n.txt) <(grep -E "^\[0\] (#|  )" $logs/attr_$n.txt) \
    <(grep -E "^\[0\] (#|  )" $logs/attr_noearly_$n.txt) <(grep -E "^\[0\] (#|  )" $logs/noearly_$n.txt) |
    awk '$2 == "#" { if ($3 == "nccl_timer:") print "--", $4; next } { printf "%9s %6s/%6s/%5s | %6s/%6s/%5s | %6s/%6s/%5s | %6s/%6s/%5s\n", $2, $3, $4, $5, $8, $9, $10, $13, $14, $15, $18, $19, $20 }'
done
