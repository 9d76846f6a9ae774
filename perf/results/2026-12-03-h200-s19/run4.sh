# Device run 4 (session 19): the library with the receive sweep (perf/experiments/receive_sweep: 4 senders
# a sweep, a plain wait for the one peer of 2 ranks, tokens waited for by one thread per peer). Ours against
# stock at 2, 4 and 8 ranks first; then the ordering check at 2/4/8, the 10-rank reduction matrices, the
# PyTorch applications and last the GPU suites, given what is left of the device's 600 s a call.
logs=/tmp/s19_run4
source perf/device_preamble.sh
started=$SECONDS
side_by_side_all "2 4 8"
tail -3 "$OUT/side_by_side.md"
device_code_checks "$started"
echo "run 4: $((SECONDS - started))s"
pack_logs
