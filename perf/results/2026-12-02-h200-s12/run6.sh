# Device run 6 (session 12): PyTorch pipeline parallelism (send/recv groups) at 2, 4 and 8 ranks against
# a single-device reference, on the final library (the shim's group path of a80a075).
set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > /tmp/prepare.log 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=20 MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30
timeout 150 python3 -m pytest -v -rfEs -p no:cacheprovider -k "pipeline" tests/test_apps_gpu.py::test_app > /tmp/apps.log 2>&1
echo "apps rc=$?: $(grep -E ' passed| failed' /tmp/apps.log | tail -1)"
grep -E "PASSED|FAILED|ERROR" /tmp/apps.log | head
