# Device run V (session 6): after merging the issue-12 groundwork (one more field in the rank record
# exchanged at init): the C ordering check at 4 ranks, ranks in one process, CuPy at 4.
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 MSCCLPP_NCCL_WAIT_TIMEOUT=20
nvcc -O2 -I shim -o /tmp/soc tests/gpu/stream_order_check.cu -L mscclpp_nccl/lib -l:libnccl.so.2 || exit 1
LD_LIBRARY_PATH=$PWD/mscclpp_nccl/lib timeout 60 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 55 -- /tmp/soc > "$OUT/soc_4.log" 2>&1
echo "stream_order n=4 rc=$? passes=$(grep -c 'PASS stream_order' "$OUT/soc_4.log")"
timeout 100 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_one_process_gpu.py "tests/test_cupy_client.py::test_cupy_client[4]" > "$OUT/suite.log" 2>&1
echo "one_process+cupy rc=$?: $(grep -E 'passed|failed' "$OUT/suite.log" | tail -1)"
