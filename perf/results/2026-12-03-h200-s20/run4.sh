# Device run 4 (session 20): the library built at this commit (kernels as session 19's e9ddd34) with session
# 20's shipped table (8 ranks: all_reduce one-shot to 64 KB, reduce's packet exchange to 256 KB).
# Ours against stock at 2, 4 and 8 ranks first (each eager trial printed), then the ordering check at
# 2/4/8, the 10-rank reduction matrices, the PyTorch applications and the GPU suites in what is left of
# the device's 600 s a call.
logs=/tmp/s20_run4
source perf/device_preamble.sh
started=$SECONDS
NCCL_TIMER_SHOW_TRIALS=1 side_by_side_all "2 4 8"
tail -3 "$OUT/side_by_side.md"
device_code_checks "$started"
echo "run 4: $((SECONDS - started))s"
pack_logs
