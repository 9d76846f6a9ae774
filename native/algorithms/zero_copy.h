// Zero-copy: kernels that read and write peers' user buffers directly (windows, see
// transport/symmetric_window.h) instead of copying through scratch. Each call is bracketed by two
// barriers between the blocks of the same index on every rank: "arrived" (a peer's kernel has started,
// so the stream work before it, which wrote its input or still reads its output, is done) and
// "finished" (no peer touches this rank's buffers any more). Each block counts its calls in device
// memory, so the barriers stay in step across kernels, grids and graph replays.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "native/device/device_types.h"
#include "native/device/grid_limits.h"
#include "native/transport/mapped_buffers.h"

namespace mscclpp_nccl {

constexpr int kZeroCopyThreads = 512;
// Largest communicator (kernels keep every rank's buffer pointers in shared memory).
constexpr int kMaxZeroCopyRanks = 64;

// What a rank posts to its peers for a mapped zero-copy call: how they find its buffers, and the call as
// it was made here (the kernel fills that in), which every rank compares with its peers' (mapped_bounds.h).
struct MappedCall {
  MappedBuffer send;
  MappedBuffer recv;
  uint64_t bytes;       // all_reduce: count x element size; an exchange: rangeBytes
  uint32_t collective;  // Collective
  int32_t root;         // rooted collectives' root, else 0
};
// Kernels read peers' posts in 64-bit words (device/posted_words.cuh: loadPosted).
static_assert(sizeof(MappedCall) % sizeof(uint64_t) == 0, "MappedCall must be whole 64-bit words");

struct ZeroCopyComm {
  int rank;
  int nranks;
  uint64_t* localFlags;  // arrived[block][sender], finished[block][sender], then MappedCall[block][sender]
  uint64_t* const* peerFlags;       // device array: every rank's flags as mapped here (own entry too)
  uint64_t* calls;                  // [block]: calls this block index has run
  const MappedRegion* mappedTable;  // [rank][kMaxMappedAllocations]: peers' allocations mapped here
  WaitControl wait;
  bool oneGpu;  // every rank runs on this GPU: the barriers order stores at device scope
};

// Barrier flags and the mapped calls' descriptions each rank holds.
inline size_t zeroCopyFlagBytes(int nranks) {
  const size_t slots = static_cast<size_t>(kMaxZeroCopyBlocks) * nranks;
  return 2 * slots * sizeof(uint64_t) + slots * sizeof(MappedCall);
}

// Where the "finished" barrier's flags start, in words of a rank's flags.
__host__ __device__ inline size_t zeroCopyFinishedAt(int nranks) {
  return static_cast<size_t>(kMaxZeroCopyBlocks) * nranks;
}

// `sender`'s description for `block`, in the flags `flags` of some rank.
__host__ __device__ inline MappedCall* mappedCallSlot(uint64_t* flags, int nranks, int block, int sender) {
  return reinterpret_cast<MappedCall*>(flags + 2 * zeroCopyFinishedAt(nranks)) +
         static_cast<size_t>(block) * nranks + sender;
}

// A buffer of one call on every rank: rank r's is bases[r] + offset (a symmetric window's promise).
struct PeerBuffers {
  char* const* bases;  // device array
  size_t offset;
};

}  // namespace mscclpp_nccl
