# Device run B (session 8): one-host regressions after session 7's connect changes: the collective
# suites at 4 and 8 ranks, the failure tests at 4 ranks, the PyTorch apps at 4 ranks.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=30 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
suite() {  # name seconds pytest-args...
  local name=$1 s=$2; shift 2
  timeout "$s" python3 -m pytest -q -rfEs -p no:cacheprovider "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$?: $(grep -E 'passed|failed|error' "$OUT/$name.log" | tail -1)"
  grep -E "^(FAILED|ERROR)" "$OUT/$name.log" | head -8
}
suite collectives 180 tests/test_collectives_gpu.py tests/test_allreduce_gpu.py -k "scenarios and (4 or 8)"
suite failures 150 tests/test_failures_gpu.py -k "4"
suite apps 200 tests/test_apps_gpu.py -k "test_app and 4"
