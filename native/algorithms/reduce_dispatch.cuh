// Turns a runtime (DataType, BinaryOp) pair into a kernel template instantiation.
#pragma once

#include <cstdint>

#include "native/common/data_type.h"
#include "native/device/reduce.cuh"

namespace mscclpp_nccl {

template <typename T>
struct TypeTag {
  using type = T;
};

// Returns `launcher.template run<T, Op>()` for the element type and operator given at run time.
template <typename Launcher>
auto dispatchReduce(DataType type, BinaryOp op, Launcher& launcher) {
  auto withType = [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (op) {
      case BinaryOp::kProd:
        return launcher.template run<T, OpProd>();
      case BinaryOp::kMax:
        return launcher.template run<T, OpMax>();
      case BinaryOp::kMin:
        return launcher.template run<T, OpMin>();
      default:
        return launcher.template run<T, OpSum>();
    }
  };
  switch (type) {
    case DataType::kInt8:
      return withType(TypeTag<int8_t>{});
    case DataType::kUint8:
      return withType(TypeTag<uint8_t>{});
    case DataType::kInt32:
      return withType(TypeTag<int32_t>{});
    case DataType::kUint32:
      return withType(TypeTag<uint32_t>{});
    case DataType::kInt64:
      return withType(TypeTag<int64_t>{});
    case DataType::kUint64:
      return withType(TypeTag<uint64_t>{});
    case DataType::kFloat16:
      return withType(TypeTag<__half>{});
    case DataType::kFloat32:
      return withType(TypeTag<float>{});
    case DataType::kFloat64:
      return withType(TypeTag<double>{});
    case DataType::kBfloat16:
      return withType(TypeTag<__nv_bfloat16>{});
    case DataType::kFp8E4M3:
      return withType(TypeTag<__nv_fp8_e4m3>{});
    default:
      return withType(TypeTag<__nv_fp8_e5m2>{});
  }
}

// Returns `launcher.template run<Raw, OpSum>()` for an unsigned type of `elementBytes` bytes: data
// movement depends only on the element size (loads at element-aligned offsets).
template <typename Launcher>
auto dispatchCopy(size_t elementBytes, Launcher& launcher) {
  switch (elementBytes) {
    case 1:
      return launcher.template run<uint8_t, OpSum>();
    case 2:
      return launcher.template run<uint16_t, OpSum>();
    case 4:
      return launcher.template run<uint32_t, OpSum>();
    default:
      return launcher.template run<uint64_t, OpSum>();
  }
}

// Reduces one word (8 bytes of elements) over ranks, in the order the words are added.
template <typename T, typename Op>
struct WordReduction {
  using W = Word<T>;
  using Acc = typename W::Acc;
  Acc acc[W::kElems];

  __device__ __forceinline__ void first(uint2 bits) { W::unpack(bits, acc); }

  __device__ __forceinline__ void add(uint2 bits) {
    Acc values[W::kElems];
    W::unpack(bits, values);
#pragma unroll
    for (int i = 0; i < W::kElems; ++i) acc[i] = Op::apply(acc[i], values[i]);
  }

  __device__ __forceinline__ uint2 result(int postDivisor) {
    if (postDivisor != 1) {
#pragma unroll
      for (int i = 0; i < W::kElems; ++i) acc[i] = acc[i] / static_cast<Acc>(postDivisor);
    }
    return W::pack(acc);
  }
};

// Reduces one unit (two words) over ranks, in the order the units are added.
template <typename T, typename Op>
struct UnitReduction {
  WordReduction<T, Op> lo;
  WordReduction<T, Op> hi;

  __device__ __forceinline__ void first(Unit unit) {
    lo.first(unit.lo);
    hi.first(unit.hi);
  }
  __device__ __forceinline__ void add(Unit unit) {
    lo.add(unit.lo);
    hi.add(unit.hi);
  }
  __device__ __forceinline__ Unit result(int postDivisor) {
    return Unit{lo.result(postDivisor), hi.result(postDivisor)};
  }
};

}  // namespace mscclpp_nccl
