# Device run 3 (session 18): the same library against stock NCCL at 2, 4 and 8 ranks, then the PyTorch
# applications.
logs=/tmp/s18_run3
source perf/device_preamble.sh
side_by_side_all "2 4 8"
pytorch_apps
head -40 "$OUT/side_by_side.md"
pack_logs
