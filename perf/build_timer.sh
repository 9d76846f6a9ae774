#!/usr/bin/env bash
# Builds perf/nccl_timer.cu into build/nccl_timer against mscclpp_nccl/lib, the command the timer's header
# documents. Every script that times runs it first: the device machine may keep an older build/ between
# calls. From the repository root:  bash perf/build_timer.sh
mkdir -p build
exec nvcc -O2 -I include -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2
