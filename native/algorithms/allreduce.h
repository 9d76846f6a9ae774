// All-reduce algorithms. Each is a launcher with the same signature; the selector picks one per call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "native/algorithms/zero_copy.h"
#include "native/common/arithmetic.h"
#include "native/common/data_type.h"
#include "native/common/status.h"
#include "native/primitives/chunk_layout.h"
#include "native/primitives/packet_layout.h"

namespace mscclpp_nccl {

struct AllReduceArgs {
  const void* send;
  void* recv;
  size_t count;
  DataType type;
  ReduceOp op;
  uint64_t ticket = 0;  // nonzero: packet kernels publish it when done (native/device/step_sequence.cuh)
};

// The segment of the input each rank owns in the two-shot and direct all-reduces of plain chunks: a
// 1/nranks share, rounded up to whole 16-byte units so that every segment keeps the buffers' alignment.
inline size_t allReduceSegmentBytes(const AllReduceArgs& args, int nranks) {
  return roundUp(divCeil(args.count * dataTypeSize(args.type), nranks), kChunkAlignment);
}

// How a kernel is launched: its grid, and how many bytes each block moves per peer in one step (at
// most the scratch slot of its protocol, a whole number of packet payloads or 16-byte chunk units; smaller
// chunks mean more, shorter steps).
struct LaunchShape {
  int blocks;
  int threads;
  size_t chunkBytes;
  bool earlyLaunch;   // may start while the stream's previous kernel runs (kernel_launch.h)
  bool programmatic;  // may carry the early-launch attribute even so (kernel_launch.h): not where early
                      // launch is off for the communicator
};

// `shape` with its early-launch flags, for a communicator whose grids of at most `earlyBlocks` launch
// early (0: none do): it launches early where it fits, and may carry the early-launch attribute at all
// only where early launch is on (kernel_launch.h). Every launcher's grid takes its flags from here.
inline LaunchShape withEarlyLaunch(LaunchShape shape, int earlyBlocks) {
  shape.earlyLaunch = shape.blocks <= earlyBlocks;
  shape.programmatic = earlyBlocks > 0;
  return shape;
}

// Whether grid `shape` holds every block and thread of grid `scratch`: a mapped kernel runs its chunked
// fallback's schedule itself (AlgorithmSelector::mappedShape makes such a grid).
inline bool holdsGrid(const LaunchShape& shape, const LaunchShape& scratch) {
  return scratch.blocks <= shape.blocks && scratch.threads <= shape.threads;
}

// One-shot: every rank sends its whole input to every peer in LL packets and reduces all inputs
// itself. One step: the latency floor for small messages, at (nranks-1) times the traffic.
Status launchAllReduceOneShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream);

// Two-shot: rank r reduces segment r of everyone's input (reduce-scatter), then sends the result to
// every peer (all-gather), both in LL packets. Two steps per round, 2(n-1)/n of the data per rank.
Status launchAllReduceTwoShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream);

// Two-shot in chunks: the same two phases in plain 16-byte chunks with semaphores, the reduced
// chunk written to every peer in the pass that computes it. For large messages.
Status launchAllReduceTwoShotChunked(const ChunkComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                     cudaStream_t stream);
// Its schedule for a grid of `shape`: the segment each rank owns, and the rounds of chunks.
Status allReduceChunkSchedule(const ChunkComm& comm, const AllReduceArgs& args, LaunchShape shape,
                              size_t* segmentBytes, ChunkSchedule* schedule);

// Zero-copy two-shot for buffers in windows: rank r reads segment r of every rank's input directly,
// reduces it and writes it into every rank's output. One read and one write of the message per rank.
// Not for PreMulSum (each rank's scalar is its own). For large messages.
Status launchAllReduceZeroCopy(const ZeroCopyComm& comm, const AllReduceArgs& args, const PeerBuffers& send,
                               const PeerBuffers& recv, LaunchShape shape, cudaStream_t stream);

// Zero-copy for buffers anywhere: every rank posts where its peers find its buffers (`mine`) and, where
// every rank's are mapped by every peer, all go zero-copy as above. Else none does, and the same kernel
// runs the two-shot chunked schedule over `chunks` for a grid of `scratch`. One kernel on `shape`, whose
// grid is at least scratch's (AlgorithmSelector::mappedShape).
Status launchAllReduceMapped(const ZeroCopyComm& comm, const ChunkComm& chunks, const AllReduceArgs& args,
                             const MappedCall& mine, LaunchShape shape, LaunchShape scratch,
                             cudaStream_t stream);

}  // namespace mscclpp_nccl
