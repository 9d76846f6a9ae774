# Device run I: DDP at 2 ranks through the same pytest harness as runG (where one run ended in SIGSEGV at
# exit), four times, with a SIGSEGV backtrace printer preloaded after our library
# (.devkit/segv.so, built from segv_backtrace.c beside this file: gcc -shared -fPIC -o segv.so segv_backtrace.c).
# Not run: no device time was left.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 PYTHONFAULTHANDLER=1
for i in 1 2 3 4; do
  LD_PRELOAD=$kit/segv.so timeout 45 python3 -m pytest -q -rA -p no:cacheprovider tests/test_apps_gpu.py -k "ddp-2" > "$OUT/ddp_$i.log" 2>&1
  echo "try $i rc=$?: $(grep -E 'passed|failed' "$OUT/ddp_$i.log" | tail -1)"
  grep -E "libnccl.so.2\(|segv.so|Fatal Python|exit code" "$OUT/ddp_$i.log" | head -12
done
