// An all-reduce's buffers as the packet kernels read and write them: 8-byte words, PreMulSum's scalar
// applied on the way in.
#pragma once

#include <cstdint>

#include "native/algorithms/allreduce.h"
#include "native/common/arithmetic.h"
#include "native/device/reduce.cuh"
#include "native/primitives/packet_layout.h"

namespace mscclpp_nccl {

// An all-reduce's buffers as packet words (8 bytes; the last one trimmed to the buffer's end).
template <typename T>
class AllReduceWords {
 public:
  __device__ explicit AllReduceWords(const AllReduceArgs& args)
      : args_(args),
        bytes_(args.count * sizeof(T)),
        sendAligned_(wordAligned(args.send)),
        recvAligned_(wordAligned(args.recv)),
        scalar_(args.op.scaling.preMultiply ? loadScalar<T>(args.op.scaling)
                                            : typename ElementTraits<T>::Acc(1)) {}

  __device__ __forceinline__ size_t count() const { return divCeil(bytes_, kPacketPayloadBytes); }

  // Word i of this rank's input, times this rank's PreMulSum scalar if any.
  __device__ __forceinline__ uint2 contribution(size_t i) const {
    const uint2 bits = loadWord<T>(static_cast<const char*>(args_.send), i, bytes_, sendAligned_);
    return args_.op.scaling.preMultiply ? Word<T>::scale(bits, scalar_) : bits;
  }

  // Stores word i of the output.
  __device__ __forceinline__ void store(size_t i, uint2 bits) const {
    storeWord<T>(static_cast<char*>(args_.recv), i, bytes_, recvAligned_, bits);
  }

  __device__ __forceinline__ int postDivisor() const { return args_.op.scaling.postDivisor; }

 private:
  const AllReduceArgs& args_;
  size_t bytes_;
  bool sendAligned_, recvAligned_;
  typename ElementTraits<T>::Acc scalar_;
};

}  // namespace mscclpp_nccl
