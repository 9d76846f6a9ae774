set -u
kit=$PWD/.devkit
source "$kit/device/prepare.sh" > "$OUT/prepare.log" 2>&1
mkdir -p /tmp/stock && cat "$kit"/stock-nccl/nccl-2.30.7-sm90.tar.xz.part-* | tar -xJ -C /tmp/stock
export MSCCLPP_NCCL_FALLBACK_LIB=/tmp/stock/nccl-2.30.7-sm90/lib/libnccl.so.2
export MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=30 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} MSCCLPP_NCCL_WAIT_TIMEOUT=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT PYTHONFAULTHANDLER=1
mkdir -p /tmp/sh
timeout -s INT 45 python3 -m mscclpp_nccl.run -n 4 --mps --timeout 40 --fake-hosts 2 -- python3 tests/gpu/failure_worker.py /tmp/sh collective:abort > "$OUT/abort.log" 2>&1
echo rc=$?
grep -v "via P2P\|Channel\|Connected\|NCCL_\|Trees\|Ring\|comm 0x.*Init\|Setting affinity\|cudaDriverVersion\|Bootstrap\|NET/\|Using network\|P2P\|threadThresholds\|CC Off\|ncclCommInit\|PROFILER\|TUNER\|Symmetric\|nvmlInit\|MNNVL\|Assigned\|Initialized\|pidfd\|[0-9] INFO [0-9]" "$OUT/abort.log" | tail -45
