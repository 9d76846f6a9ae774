// The checks a mapped zero-copy call makes on what its peers post (zero_copy.h: MappedCall) before any
// rank touches a peer's buffer: the same calls on every rank, and an index and offset that stay inside
// the allocation this rank has mapped for the peer. Host and device code, so that the CPU test
// (tests/mapped_bounds_driver.cc) runs exactly what the kernels decide (zero_copy_kernel.cuh).
#pragma once

#include <cstdint>

#include "native/algorithms/zero_copy.h"

namespace mscclpp_nccl {

enum class MappedCheck : int {
  kOk = 0,
  kCountsDiffer,     // the peer was called with another byte count
  kCallsDiffer,      // ... or another collective or root
  kIndexOutOfRange,  // the post names no slot of the table
  kNotMapped,        // its slot is empty here
  kOutOfBounds,      // what this rank touches from the post's offset runs past the allocation's end
};

// Whether a peer's post (`theirs`) was made for the call this rank posted (`mine`). Every rank reads
// every rank's post, so where any two differ, every rank finds one that differs from its own.
__host__ __device__ inline MappedCheck compareMappedCalls(const MappedCall& mine, const MappedCall& theirs) {
  if (theirs.bytes != mine.bytes) return MappedCheck::kCountsDiffer;
  if (theirs.collective != mine.collective || theirs.root != mine.root) return MappedCheck::kCallsDiffer;
  return MappedCheck::kOk;
}

// Whether this rank may touch a peer's buffer, allocation `index` + `offset` as the peer posted it, up to
// `reach` bytes from the buffer's start (the end of what this rank touches there; 0: nothing). `row`: the
// peer's kMaxMappedAllocations entries of the table as mapped here, read only at `index` once it is in
// range. On kOk, *base is the allocation's start here.
__host__ __device__ inline MappedCheck checkMappedRange(const volatile MappedRegion* row, uint32_t index,
                                                        uint64_t offset, uint64_t reach, char** base) {
  if (index >= static_cast<uint32_t>(kMaxMappedAllocations)) return MappedCheck::kIndexOutOfRange;
  char* const start = row[index].base;
  const uint64_t bytes = row[index].bytes;
  if (start == nullptr) return MappedCheck::kNotMapped;
  if (reach > bytes || offset > bytes - reach) return MappedCheck::kOutOfBounds;  // offset + reach, unwrapped
  *base = start;
  return MappedCheck::kOk;
}

}  // namespace mscclpp_nccl
