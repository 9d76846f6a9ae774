# Device run 3 (session 15): after run 2's suites passed, ours against stock NCCL 2.30.7 at 2, 4 and 8
# ranks, then the applications at 2, 4 and 8 ranks (FSDP2, DDP, tensor and pipeline parallel, a peer's
# death) against the library.
logs=/tmp/s15_run3
source perf/device_preamble.sh
side_by_side_all "2 4 8"
pytorch_apps
pack_logs
tail -45 "$OUT/side_by_side.md"
