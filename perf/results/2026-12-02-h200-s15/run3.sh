# Device run 3 (session 15): after run 2's suites passed, ours against stock NCCL 2.30.7 at 2, 4 and 8
# ranks, then the applications at 2, 4 and 8 ranks (FSDP2, DDP, tensor and pipeline parallel, a peer's
# death) against the library.
logs=/tmp/s15_run3
source perf/device_preamble.sh
side_by_side_all "2 4 8"
run_tests apps 200 "tests/test_apps_gpu.py::test_app[fsdp2-2]" "tests/test_apps_gpu.py::test_app[fsdp2-4]" \
  "tests/test_apps_gpu.py::test_app[ddp-4]" "tests/test_apps_gpu.py::test_app[tp-8]" \
  "tests/test_apps_gpu.py::test_app[pipeline-8]" \
  "tests/test_apps_gpu.py::test_peer_death_then_destroy_process_group[0-4]"
pack_logs
tail -45 "$OUT/side_by_side.md"
