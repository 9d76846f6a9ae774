# Device run 2 (session 18): the library with exchanges mapped whatever the table's scratch choice and
# the 4-rank table's broadcast packets to 1 MB and two-shot reduce at 1 MB. Correctness: the ordering
# check at 2/4/8, the GPU suites (the zero-copy one now also at half ranges, where 4-rank all_gather maps
# over a packet choice), the CuPy client tests. Timing in run 3.
logs=/tmp/s18_run2
source perf/device_preamble.sh
started=$SECONDS
check_stream_order "2 4 8"
gpu_suites
run_tests cupy 150 tests/test_cupy_client.py
echo "run 2: $((SECONDS - started))s"
grep -h "PASS exchanges\|FAIL" $logs/tests.log | sort | uniq -c | head
pack_logs
