// The largest grid each kind of kernel launches, in blocks. They size the per-block state that a
// communicator allocates (step counters, scratch regions, barrier flags) and bound what it may hold of
// its GPU's blocks (transport/block_share.h), so they sit below both the kernels and the transports.
#pragma once

namespace mscclpp_nccl {

constexpr int kMaxPacketBlocks = 32;    // packet kernels (primitives/packet_layout.h)
constexpr int kMaxChunkBlocks = 64;     // chunked kernels, one channel a block (primitives/chunk_layout.h)
constexpr int kMaxZeroCopyBlocks = 64;  // zero-copy kernels (algorithms/zero_copy.h)

// Early launch (native/device/dependent_launch.cuh): the largest grid ever launched early. Below it, the
// grid must also fit in half of a rank's share of co-resident blocks (AlgorithmSelector::earlyLaunchBlocks).
constexpr int kEarlyLaunchMaxBlocks = 32;

}  // namespace mscclpp_nccl
