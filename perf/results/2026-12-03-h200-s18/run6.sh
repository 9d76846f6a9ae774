# Device run 6 (session 18; perf/experiments/receive_batch): PacketStep::receiveReduce loading up to 8
# senders' words before waiting on any, against the library before it (run 5's), in one command. Both libraries travel xz-compressed in
# .s18/ (carried with .devkit; the tree's build would not fit beside a second library).
# Correctness: the ordering check at 8 ranks, the all-reduce and collective scenarios at 8, and the
# matrices at 10 ranks (two batches of senders). Timing: all_reduce, reduce and reduce_scatter (the
# collectives that receive-reduce packets) at 8 B-1 MB, 4 and 8 ranks, before / after / before / after.
mkdir -p mscclpp_nccl/lib /tmp/before_lib
xz -dc .s18/after.so.2.xz > mscclpp_nccl/lib/libnccl.so.2 && ln -sf libnccl.so.2 mscclpp_nccl/lib/libnccl.so
xz -dc .s18/before.so.2.xz > /tmp/before_lib/libnccl.so.2 && ln -sf libnccl.so.2 /tmp/before_lib/libnccl.so
logs=/tmp/s18_run6
source perf/device_preamble.sh
started=$SECONDS
check_stream_order "8"
run_tests tests 200 "tests/test_allreduce_gpu.py::test_allreduce_scenarios[8]" \
  "tests/test_collectives_gpu.py::test_collective_scenarios[8]" \
  tests/test_allreduce_gpu.py::test_reductions_over_more_ranks_than_a_receive_batch
echo "tests: $((SECONDS - started))s"
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
T=$logs/timer && mkdir -p $T
for trial in 1 2; do
  for n in 4 8; do
    bash perf/time_split.sh $T before$trial /tmp/before_lib $n all_reduce,reduce,reduce_scatter 8 1048576
    bash perf/time_split.sh $T after$trial $PWD/mscclpp_nccl/lib $n all_reduce,reduce,reduce_scatter 8 1048576
  done
done
echo "timing: $((SECONDS - started))s"
python3 - "$T" <<'PY' | tee "$OUT/receive_batch.txt"
import glob, os, statistics, sys
def table(path):
    rows = {}
    for line in open(path):
        if not line.startswith("#") and line.split():
            b, e, g = line.split()[:3]
            rows[int(b)] = (float(e), float(g))
    return rows
for n in (4, 8):
    for coll in ("all_reduce", "reduce", "reduce_scatter"):
        runs = {k: [table(f"{sys.argv[1]}/{k}{t}_{coll}_{n}.txt") for t in (1, 2)] for k in ("before", "after")}
        sizes = sorted(runs["before"][0])
        def mid(k, b, col):
            return statistics.mean(r[b][col] for r in runs[k] if b in r)
        print(f"== {coll} {n} ranks: graph before -> after (eager before -> after), us")
        print(" ".join(f"{b}:{mid('before', b, 1):.2f}->{mid('after', b, 1):.2f}"
                       f"({mid('before', b, 0):.1f}->{mid('after', b, 0):.1f})" for b in sizes))
PY
pack_logs
