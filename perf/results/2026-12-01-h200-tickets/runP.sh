# Device run P (session 6): the exit-time SIGSEGV seen once after blocked:shrink at 4 ranks (run O):
# the abort-while-blocked tests five times each with a SIGSEGV backtrace printer; the destroy-after-death
# test with the Python destroy that releases the communicator after finalize reports the lost peer.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
for i in 1 2 3 4 5; do
  LD_PRELOAD=$kit/segv.so timeout 100 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "blocked and 4" > "$OUT/blocked_$i.log" 2>&1
  echo "blocked-4 try $i rc=$?: $(grep -E 'passed|failed' "$OUT/blocked_$i.log" | tail -1) $(grep -h 'exited with code' "$OUT/blocked_$i.log" | sort -u | tr '\n' ';')"
  grep -E "libnccl.so.2\(|segv.so\(|libnccl.so.2$" "$OUT/blocked_$i.log" | head -30
done
LD_PRELOAD=$kit/segv.so timeout 100 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "mid_collective and 4" > "$OUT/mid_4.log" 2>&1
echo "mid_collective-4 rc=$?: $(grep -E 'passed|failed' "$OUT/mid_4.log" | tail -1)"
grep -E "RESULT" "$OUT/mid_4.log" | sed 's/^.*RESULT/RESULT/' | sort | head
