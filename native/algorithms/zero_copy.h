// Zero-copy: kernels that read and write peers' user buffers directly (windows, see
// transport/symmetric_window.h) instead of copying through scratch. Each call is bracketed by two
// barriers between the blocks of the same index on every rank: "arrived" (a peer's kernel has started,
// so the stream work before it, which wrote its input or still reads its output, is done) and
// "finished" (no peer touches this rank's buffers any more). Each block counts its calls in device
// memory, so the barriers stay in step across kernels, grids and graph replays.
#pragma once

#include <cstddef>
#include <cstdint>

#include "native/device/device_types.h"

namespace mscclpp_nccl {

constexpr int kMaxZeroCopyBlocks = 64;
constexpr int kZeroCopyThreads = 512;
// Largest communicator (kernels keep every rank's buffer pointers in shared memory).
constexpr int kMaxZeroCopyRanks = 64;

struct ZeroCopyComm {
  int rank;
  int nranks;
  uint64_t* localFlags;        // arrived[block][sender], then finished[block][sender]
  uint64_t* const* peerFlags;  // device array: every rank's flags as mapped here (own entry too)
  uint64_t* calls;             // [block]: calls this block index has run
  WaitControl wait;
};

// Barrier flags each rank holds.
inline size_t zeroCopyFlagBytes(int nranks) {
  return 2ull * kMaxZeroCopyBlocks * static_cast<size_t>(nranks) * sizeof(uint64_t);
}

// A buffer of one call on every rank: rank r's is bases[r] + offset (a symmetric window's promise).
struct PeerBuffers {
  char* const* bases;  // device array
  size_t offset;
};

}  // namespace mscclpp_nccl
