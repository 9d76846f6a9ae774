# Device run 2 (session 17): the GPU's pace for back-to-back eager calls (200 a timing, so that the pace,
# not the start, sets the figure; run 1 showed ours GPU-bound: the host returns in 2.6 us a call, the
# stream drains at 4.3-5.1). all_reduce at 8 B, 128 B and 2 KB with NCCL_TIMER_TIMELINE=1:
# ours by default; without early launch; the one-shot kernel forced to 128 threads, and to 4 blocks;
# 2 and 8 ranks; stock; and the timer's `empty` (one empty kernel a call, no collective) at 1 and 4 ranks.
# Then reduce at 4 ranks, 128 KB-4 MB, by the shipped table and on the two-shot packet schedule.
logs=/tmp/s17_run2
source perf/device_preamble.sh
unpack_stock
nvcc -O2 -I shim -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
pace() {  # NAME RANKS LIBDIR COLLECTIVE [VAR=VALUE...]
  local name=$1 n=$2 lib=$3 collective=$4
  shift 4
  env "$@" NCCL_TIMER_TIMELINE=1 LD_LIBRARY_PATH="$lib" timeout 60 python3 -m mscclpp_nccl.run -n "$n" --mps \
    --timeout 55 -- build/nccl_timer "$collective" 8 2048 16 200 > "$logs/$name.log" 2>&1 ||
    echo "pace $name failed"
}
ours=$PWD/mscclpp_nccl/lib
one_shot=all_reduce=allreduce_one_shot_packet
started=$SECONDS
pace ours_4 4 "$ours" all_reduce
pace ours_4_no_early 4 "$ours" all_reduce MSCCLPP_NCCL_EARLY_LAUNCH=0
pace ours_4_128_threads 4 "$ours" all_reduce MSCCLPP_NCCL_ALGO=$one_shot/1/128
pace ours_4_4_blocks 4 "$ours" all_reduce MSCCLPP_NCCL_ALGO=$one_shot/4/512
pace ours_2 2 "$ours" all_reduce
pace ours_8 8 "$ours" all_reduce
pace stock_4 4 "$STOCK_LIB" all_reduce NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MAX_CTAS=8
pace empty_4 4 "$ours" empty
pace empty_1 1 "$ours" empty
# Reduce at 4 ranks between 128 KB and 4 MB: the shipped table (packets, then lanes from 1 MB) against the
# two-shot packet schedule, which the table takes only at 8 ranks.
for algo in table reduce_two_shot_packet; do
  extra=() && [ $algo != table ] && extra=(MSCCLPP_NCCL_ALGO=reduce=$algo)
  env "${extra[@]}" LD_LIBRARY_PATH="$ours" timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- \
    build/nccl_timer reduce 131072 4194304 2 20 > "$logs/reduce_$algo.log" 2>&1 || echo "reduce $algo failed"
done
echo "paces: $((SECONDS - started))s"
for f in "$logs"/*.log; do
  [ "$(basename "$f")" = prepare.log ] && continue
  python3 perf/timeline_summary.py "$f"
  grep -h "^\[0\]" "$f" | grep -v timeline | tail -8
done > "$OUT/pace.md" 2>&1
# The library of this run has the exchange flow table (exchange.h) and the renamed two-shot kernel: the
# collective scenarios at 2, 4 and 8 ranks and the two-shot reduce forced at 4.
run_tests collectives 200 tests/test_collectives_gpu.py::test_collective_scenarios \
  "tests/test_collectives_gpu.py::test_collectives_forced_algorithm[reduce_two_shot-4]"
pack_logs
cat "$OUT/pace.md"
