// The peers a verb sends to or receives from, as predicates on a rank, and the piece of the buffers it
// moves. The packet verbs tell the three
// kinds below apart at compile time, so that a kernel compiled for one flow holds only its loops (the
// same schedule with its peers read at run time was 15-25% slower at 4 and 8 ranks on one H200,
// perf/packet_kernel_bench.cu); any other predicate is asked at run time, rank by rank.
#pragma once

#include <cstddef>
#include <type_traits>

namespace mscclpp_nccl {

struct AllPeers {
  __host__ __device__ constexpr bool operator()(int) const { return true; }
};

struct NoPeers {
  __host__ __device__ constexpr bool operator()(int) const { return false; }
};

struct OneRank {
  int rank;
  __host__ __device__ constexpr bool operator()(int r) const { return r == rank; }
};

// What a round moves of each buffer a verb names: bytes [first, first + bytes) of a buffer whose valid
// bytes end `total` bytes from its start (the round's piece is trimmed to them).
struct Piece {
  size_t first;
  size_t bytes;
  size_t total;
};

template <typename Peers>
constexpr bool kAllPeers = std::is_same_v<Peers, AllPeers>;
template <typename Peers>
constexpr bool kNoPeers = std::is_same_v<Peers, NoPeers>;
template <typename Peers>
constexpr bool kOneRank = std::is_same_v<Peers, OneRank>;

}  // namespace mscclpp_nccl
