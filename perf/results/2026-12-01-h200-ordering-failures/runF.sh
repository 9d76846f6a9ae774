set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=20 PYTHONPATH=$PWD:${PYTHONPATH:-}
LD_PRELOAD=$kit/segv.so timeout 60 python3 tests/gpu/one_process_worker.py > "$OUT/ours.log" 2>&1; echo "ours rc=$?"; grep -v "^ *File\|^  " "$OUT/ours.log" | tail -40
