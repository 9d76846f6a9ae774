#!/usr/bin/env bash
# Builds perf/packet_kernel_bench.cu into OUTPUT against the kernels of SRC_ROOT (a folder holding native/,
# such as a patched copy of the tree to compare with; default the repository root), the command the
# bench's header documents. From the repository root:  bash perf/build_packet_bench.sh OUTPUT [SRC_ROOT]
set -u
out=${1:?usage: build_packet_bench.sh OUTPUT [SRC_ROOT]} src=${2:-.}
exec nvcc -std=c++17 -O3 -I"$src" -I. --expt-relaxed-constexpr -arch=sm_90 -o "$out" perf/packet_kernel_bench.cu \
  "$src"/native/algorithms/{exchange_packet.cu,allreduce_one_shot_packet.cu,allreduce_two_shot_packet.cu} \
  "$src"/native/algorithms/{kernel_launch.cc,launch_completion.cc,launch_record.cc,collective_names.cc} "$src"/native/collective_plans.cc \
  "$src"/native/common/{logging.cc,env.cc} "$src"/native/transport/cuda_driver.cc
