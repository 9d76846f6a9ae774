# Sourced at the top of a script run on the GPU machine (kept outside the tree), from the repository root,
# after setting $logs (a folder for the run's logs, emptied first):
#     logs=/tmp/gpu_logs; source perf/device_preamble.sh
# Prepares the machine (.devkit/device/prepare.sh: the carried wheels, NVLink multicast off, a private MPS
# daemon), makes $logs and build/, and sets what every run uses: PYTHONPATH, bounded waits, the shipped
# tuning table. unpack_stock puts stock NCCL 2.30.7 (carried in .devkit/stock-nccl) in $STOCK_LIB;
# check_stream_order, zero_copy_suite, collective_suites and pytorch_apps run the ordering check, the GPU
# test suites and the applications that a change of device code needs (device_code_checks 1 and 2 run
# them); fake_host_suites the hierarchical path; run_tests runs any others; nccl_tests_side_by_side and
# side_by_side_all time ours against stock, before_after against an earlier build of ours; pack_logs packs
# $logs into $OUT/NAME.tgz, NAME the folder's (few files come back).
set -u
kit=$PWD/.devkit
rm -rf "$logs" && mkdir -p "$logs" build  # a machine may keep /tmp from an earlier run
source "$kit/device/prepare.sh" > "$logs/prepare.log" 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
export MSCCLPP_NCCL_TUNING_FILE=$PWD/mscclpp_nccl/tuning/default.json

unpack_stock() {
  mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
  STOCK_LIB=/tmp/stock/nccl-2.30.7-sm90/lib
}

# The ordering check across streams (tests/gpu/stream_order_check.cu) at each of the rank counts "$1".
check_stream_order() {
  nvcc -O2 -I include -o build/stream_order_check tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2
  for n in $1; do
    LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 100 python3 -m mscclpp_nccl.run -n $n --mps --timeout 90 -- \
      build/stream_order_check > "$logs/stream_order_$n.log" 2>&1
    echo "stream_order n=$n rc=$? passes=$(grep -c 'PASS stream_order' "$logs/stream_order_$n.log")" \
      "$(grep -m1 FAIL "$logs/stream_order_$n.log" | cut -c1-160)"
  done
}

# Every pytest node id given (or whole files) from tests/, into $logs/$1.log: run_tests NAME LIMIT_S TESTS...
# At the limit pytest is interrupted, not killed, so that the log keeps the failures seen so far; the test
# that was running is named.
run_tests() {
  local name=$1 limit=$2 rc
  shift 2
  timeout -s INT -k 20 "$limit" python3 -m pytest -v -rfEs -p no:cacheprovider --durations=0 "$@" \
    > "$logs/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc: $(grep -E ' passed| failed' "$logs/$name.log" | tail -1)"
  [ $rc = 124 ] && echo "  stopped at $limit s in: $(grep -E '^tests/.*::' "$logs/$name.log" | tail -1 | cut -d' ' -f1)"
  grep -E "^(FAILED|ERROR)" "$logs/$name.log" | head
}

# The PyTorch applications against the library, each checked against stock NCCL's losses: FSDP2 at 2 and
# 4 ranks, DDP at 4, tensor and pipeline parallel at 8, a peer's death then destroy_process_group at 4.
pytorch_apps() {
  run_tests apps 200 "tests/test_apps_gpu.py::test_app[fsdp2-2]" "tests/test_apps_gpu.py::test_app[fsdp2-4]" \
    "tests/test_apps_gpu.py::test_app[ddp-4]" "tests/test_apps_gpu.py::test_app[tp-8]" \
    "tests/test_apps_gpu.py::test_app[pipeline-8]" \
    "tests/test_apps_gpu.py::test_peer_death_then_destroy_process_group[0-4]"
}

# The zero-copy suite (2, 4, 8 ranks and switched off) within $1 seconds (default 300).
zero_copy_suite() {
  run_tests zero_copy "${1:-300}" tests/test_zero_copy_gpu.py
}

# The collective, send/recv and all-reduce suites at 2, 4 and 8 ranks within $1 seconds (default 500):
# together with the zero-copy suite they outgrow one call of the device's 600 s.
collective_suites() {
  run_tests collectives "${1:-500}" tests/test_collectives_gpu.py::test_collective_scenarios \
    tests/test_collectives_gpu.py::test_p2p_chunked_forced tests/test_collectives_gpu.py::test_p2p_many_peers \
    tests/test_allreduce_gpu.py::test_allreduce_scenarios
}

# The hierarchical path over fake hosts (tests that need a stock NCCL of 2.30 or later beside ours, named by
# MSCCLPP_NCCL_FALLBACK_LIB, and skip without it): the layouts, and DDP and a peer's death under PyTorch.
fake_host_suites() {
  unpack_stock
  MSCCLPP_NCCL_FALLBACK_LIB=$STOCK_LIB/libnccl.so.2 run_tests fake_hosts "${1:-400}" \
    tests/test_hierarchical_gpu.py tests/test_apps_gpu.py::test_ddp_over_fake_hosts \
    tests/test_apps_gpu.py::test_peer_death_over_fake_hosts
}

# Everything a change of device code must pass, in two calls of the device: device_code_checks 1 runs the
# ordering check at 2/4/8, the 10-rank reduction matrices, the PyTorch applications and the zero-copy suite;
# device_code_checks 2 the collective suites.
device_code_checks() {
  case ${1:?device_code_checks 1|2} in
    1)
      check_stream_order "2 4 8"
      run_tests ten_ranks 90 "tests/test_allreduce_gpu.py::test_reductions_over_more_ranks_than_a_sweep"
      pytorch_apps
      zero_copy_suite
      ;;
    2) collective_suites ;;
    *) echo "device_code_checks: the part is 1 or 2" >&2 ;;
  esac
}

# Ours against stock NCCL 2.30.7, every collective the timer knows, at each of the rank counts "$1":
# the table goes to $OUT/side_by_side.md, a plot per rank count to $OUT/side_by_side_N.svg, the timer's
# outputs to $logs/timer.
side_by_side_all() {
  unpack_stock
  local started=$SECONDS
  MSCCLPP_NCCL_WAIT_TIMEOUT=30 TIMER_TIMEOUT=150 bash perf/side_by_side.sh "$logs/timer" "$STOCK_LIB" "$1" \
    all_reduce all_gather reduce_scatter alltoall broadcast reduce gather scatter sendrecv
  echo "side by side: $((SECONDS - started))s"
  python3 perf/side_by_side.py "$logs/timer" > "$OUT/side_by_side.md" 2>&1
  python3 perf/plot_side_by_side.py "$logs/timer" "$OUT" > /dev/null  # side_by_side_N.svg
}

# NVIDIA's nccl-tests (carried in .devkit/nccl-tests) through perf/nccl_tests.sh into $logs/NAME, tabled into
# $OUT/NAME.md and $OUT/NAME.csv with the GPU named from nvidia-smi:
#   timed_nccl_tests NAME AGAINST_LIB "RANKS..." "MODES..." BINARY...   (AGAINST_LIB "-": no stock)
# with BEFORE_LIB, table flags (TABLE_FLAGS) and the other library's name (AGAINST_NAME) from the caller.
timed_nccl_tests() {
  local name=$1 against=$2 ranks=$3 modes=$4 nt gpu
  shift 4
  nt=$(bash "$kit/nccl-tests/build.sh") || { echo "nccl-tests: the build failed"; return 1; }
  bash perf/nccl_tests.sh "$logs/$name" "$nt" "$PWD/mscclpp_nccl/lib/libnccl.so.2" "$against" "$ranks" "$modes" "$@"
  gpu="1x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) under MPS (ranks share it), CUDA 13.0"
  # shellcheck disable=SC2086
  python3 perf/nccl_tests_table.py "$logs/$name" ${TABLE_FLAGS:-} --csv "$OUT/$name.csv" --gpu "$gpu" \
    --library "mscclpp-nccl $(build_commit mscclpp_nccl/lib)" --stock "${AGAINST_NAME:-stock NCCL 2.30.7}" \
    > "$OUT/$name.md"
}

# Ours against stock NCCL 2.30.7 in one run: nccl_tests_side_by_side "RANKS..." "MODES..." BINARY... (e.g.
# "4" "eager graph" all_reduce reduce_scatter); outputs in $logs/nccl_tests, $OUT/nccl_tests.{md,csv}.
nccl_tests_side_by_side() {
  unpack_stock
  timed_nccl_tests nccl_tests "$STOCK_LIB/libnccl.so.2" "$@"
}

# This build against another build of ours carried in build/before/libnccl.so.2, in one run, without stock
# (so that both libraries fit the carry): before_after "RANKS..." "MODES..." BINARY...; SIZES and ITERS as
# for perf/nccl_tests.sh; outputs in $logs/before_after, $OUT/before_after.{md,csv}.
before_after() {
  BEFORE_LIB=$PWD/build/before/libnccl.so.2 TABLE_FLAGS="--against before" \
    AGAINST_NAME="mscclpp-nccl $(build_commit build/before)" timed_nccl_tests before_after - "$@"
}

# The commit a build of ours was made from, by the build_info.json beside its library (the folder "$1").
build_commit() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["git_commit"][:12])' "$1/build_info.json" \
    2>/dev/null || echo "(unknown build)"
}

pack_logs() { tar -czf "$OUT/$(basename "$logs").tgz" -C "$logs" .; }  # one tarball per run
