# Device run E: why tests/gpu/one_process_worker.py dies with SIGSEGV (Python and native stacks), and
# whether the previous library passes it.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=20 PYTHONPATH=$PWD:${PYTHONPATH:-}
timeout 60 python3 -X faulthandler tests/gpu/one_process_worker.py > "$OUT/ours.log" 2>&1; echo "ours rc=$?"; tail -25 "$OUT/ours.log"
if command -v gdb >/dev/null; then
  timeout 90 gdb -q -batch -ex run -ex bt -ex "thread apply all bt 8" --args python3 tests/gpu/one_process_worker.py > "$OUT/gdb.log" 2>&1
  grep -n -A30 "SIGSEGV" "$OUT/gdb.log" | head -60
else echo "no gdb"; fi
sleep 3
MSCCLPP_NCCL_LIB=$kit/before/libnccl.so.2 timeout 60 python3 tests/gpu/one_process_worker.py > "$OUT/previous.log" 2>&1; echo "previous rc=$?"; tail -5 "$OUT/previous.log"
