// How kernels reach the user buffers of peers without windows: every rank keeps a table of the peers'
// allocations that it has mapped (transport/mapped_allocations.h fills it), and a buffer of a call is
// described as an entry of that table plus an offset. Plain structs, read by host code and kernels
// (algorithms/zero_copy.h).
#pragma once

#include <cstdint>

namespace mscclpp_nccl {

// Allocations of each rank that its peers keep mapped: the rows of the table.
constexpr int kMaxMappedAllocations = 256;

// How a rank's peers find one of its buffers: allocation `index` in their table of its allocations,
// plus `offset`. `ready`: every peer has mapped that allocation.
struct MappedBuffer {
  uint64_t offset;
  uint32_t index;
  uint32_t ready;
};

// One peer allocation as mapped here: its start and its size.
struct MappedRegion {
  char* base;  // null: not mapped
  uint64_t bytes;
};

}  // namespace mscclpp_nccl
