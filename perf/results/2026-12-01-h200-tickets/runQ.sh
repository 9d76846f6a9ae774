# Device run Q (session 6): what the shipped build had not run yet. The remaining PyTorch applications
# (DDP 8, TP 2/8, pipeline 2/8); the kill-at-init tests at 2/4/8; the abort-while-blocked tests at 2 and 8
# with a SIGSEGV backtrace printer (an exit-time crash was seen once at 4 in run O).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 200 python3 -m pytest -q -rA -p no:cacheprovider tests/test_apps_gpu.py -k "test_app and (ddp-8 or tp-2 or tp-8 or pipeline-2 or pipeline-8)" > "$OUT/apps.log" 2>&1
echo "apps rc=$?: $(grep -E 'passed|failed' "$OUT/apps.log" | tail -1)"
grep -h "RESULT" "$OUT/apps.log" | sed 's/^.*RESULT/RESULT/' | sort -u
LD_PRELOAD=$kit/segv.so timeout 150 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "blocked and (2 or 8)" > "$OUT/blocked.log" 2>&1
echo "blocked 2/8 rc=$?: $(grep -E 'passed|failed' "$OUT/blocked.log" | tail -1) $(grep -h 'exited with code' "$OUT/blocked.log" | sort -u | tr '\n' ';')"
grep -E "libnccl.so.2\(|segv.so\(|libnccl.so.2$" "$OUT/blocked.log" | head -30
grep -E "RESULT" "$OUT/blocked.log" | sed 's/^.*RESULT/RESULT/' | sort | awk '{print $2}' | sort | uniq -c
timeout 200 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "init" > "$OUT/init.log" 2>&1
echo "init kills rc=$?: $(grep -E 'passed|failed' "$OUT/init.log" | tail -1)"
grep -E "RESULT" "$OUT/init.log" | sed 's/^.*RESULT/RESULT/' | cut -c1-150 | sort | head -24
