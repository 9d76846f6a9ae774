# Device run S (session 6): run R again with the library linked -z nodelete (cffi dlcloses it at exit while a
# rendezvous root thread of the failed shrink still runs: SIGSEGV with rip == the fault address, unmapped code).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
gcc -shared -fPIC -O1 -o /tmp/segv2.so "$kit/segv2.c" || exit 1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
  n=8; [ $((i % 2)) = 0 ] && n=4
  LD_PRELOAD=/tmp/segv2.so timeout 60 python3 -m pytest -q -s -rfEs -p no:cacheprovider tests/test_failures_gpu.py -k "blocked and shrink-$n" > "$OUT/shrink_$i.log" 2>&1
  echo "shrink-$n try $i rc=$? $(grep -h 'exited with code' "$OUT/shrink_$i.log" | sort -u | tr '\n' ';')"
  grep -A30 "SEGV2" "$OUT/shrink_$i.log" | head -40
done
