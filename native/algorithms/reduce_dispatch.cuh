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

// The type a tag stands for: `Tagged<decltype(tag)>` inside a generic lambda.
template <typename Tag>
using Tagged = typename Tag::type;

// Returns `launch(TypeTag<T>{}, TypeTag<Op>{})` for the element type and operator given at run time.
// `launch` is the algorithm's generic lambda, which instantiates and launches its kernel for them.
template <typename Launch>
auto dispatchReduce(DataType type, BinaryOp op, Launch&& launch) {
  auto withType = [&](auto tag) {
    switch (op) {
      case BinaryOp::kProd:
        return launch(tag, TypeTag<OpProd>{});
      case BinaryOp::kMax:
        return launch(tag, TypeTag<OpMax>{});
      case BinaryOp::kMin:
        return launch(tag, TypeTag<OpMin>{});
      default:
        return launch(tag, TypeTag<OpSum>{});
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

// Returns `launch(TypeTag<Raw>{}, TypeTag<OpSum>{})` for an unsigned type of `elementBytes` bytes: data
// movement depends only on the element size (loads at element-aligned offsets).
template <typename Launch>
auto dispatchCopy(size_t elementBytes, Launch&& launch) {
  switch (elementBytes) {
    case 1:
      return launch(TypeTag<uint8_t>{}, TypeTag<OpSum>{});
    case 2:
      return launch(TypeTag<uint16_t>{}, TypeTag<OpSum>{});
    case 4:
      return launch(TypeTag<uint32_t>{}, TypeTag<OpSum>{});
    default:
      return launch(TypeTag<uint64_t>{}, TypeTag<OpSum>{});
  }
}

}  // namespace mscclpp_nccl
