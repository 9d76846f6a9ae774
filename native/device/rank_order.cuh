// Peers in ring order from a rank, without the integer division of `%` (kernels compute these per
// element).
#pragma once

namespace mscclpp_nccl {

// The k-th rank after `rank` (0 <= k < nranks).
__host__ __device__ __forceinline__ int peerAfter(int rank, int k, int nranks) {
  const int peer = rank + k;
  return peer < nranks ? peer : peer - nranks;
}

// The k-th rank before `rank` (0 <= k < nranks).
__host__ __device__ __forceinline__ int peerBefore(int rank, int k, int nranks) {
  const int peer = rank - k;
  return peer >= 0 ? peer : peer + nranks;
}

}  // namespace mscclpp_nccl
