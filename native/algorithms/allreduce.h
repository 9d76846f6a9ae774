// All-reduce algorithms. Each is a launcher with the same signature; the selector picks one per call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "native/algorithms/packet_layout.h"
#include "native/common/data_type.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

struct AllReduceArgs {
  const void* send;
  void* recv;
  size_t count;
  DataType type;
  ReduceOp op;
};

// How a packet kernel is launched: its grid, and how many words each block moves per peer in one
// step (at most the scratch slot; smaller chunks mean more, shorter steps).
struct LaunchShape {
  int blocks;
  int threads;
  size_t chunkWords;
};

// One-shot: every rank sends its whole input to every peer in LL packets and reduces all inputs
// itself. One step: the latency floor for small messages, at (nranks-1) times the traffic.
Status launchAllReduceOneShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream);

// Two-shot: rank r reduces segment r of everyone's input (reduce-scatter), then sends the result to
// every peer (all-gather), both in LL packets. Two steps per round, 2(n-1)/n of the data per rank.
Status launchAllReduceTwoShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream);

}  // namespace mscclpp_nccl
