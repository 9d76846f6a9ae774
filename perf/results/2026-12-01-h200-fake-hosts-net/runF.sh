# Device run F (session 8, branch kernel-primitives): the packet kernels rewritten over PacketStep
# (send / receive / receive-reduce) and the typed launcher, at 4 ranks: all-reduce forced to each
# packet algorithm (every type and op, in and out of place, large, graphs), then every collective with
# the default selection (exchange packet and chunked kernels, send/recv).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=20 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
check() {  # label algo worker scenarios...
  local label=$1 algo=$2 worker=$3; shift 3
  MSCCLPP_NCCL_ALGO=$algo timeout 70 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 60 -- python3 "tests/gpu/$worker" "$@" \
    > "$OUT/$label.log" 2>&1
  local rc=$? line=""
  for s in "$@"; do line="$line $s:$(grep -c "PASS $s" "$OUT/$label.log")/4"; done
  echo "$label rc=$rc$line"
}
check one_shot all_reduce=allreduce_one_shot_packet allreduce_worker.py matrix graph
check two_shot all_reduce=allreduce_two_shot_packet allreduce_worker.py matrix graph
check collectives "" collectives_worker.py matrix graph p2p groups
