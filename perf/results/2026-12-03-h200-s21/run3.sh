# Device run 3 (session 21): the library with a one-block grid's ticket published without the count
# (native/device/step_sequence.cuh) and kernels launched through the driver with each kernel's handle
# found once per context (native/algorithms/kernel_launch.cc). Ours against stock at 2, 4 and 8 ranks
# (the timer's eager trials now taken in turns over all sizes; each trial printed), then the ordering
# check at 2/4/8, the 10-rank reduction matrices, the PyTorch applications and the GPU suites.
logs=/tmp/s21_run3
source perf/device_preamble.sh
started=$SECONDS
NCCL_TIMER_SHOW_TRIALS=1 side_by_side_all "2 4 8"
tail -3 "$OUT/side_by_side.md"
device_code_checks "$started"
echo "run 3: $((SECONDS - started))s"
pack_logs
