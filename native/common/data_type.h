// Element types and reduction kinds of the native runtime (values equal NCCL's enums).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mscclpp_nccl {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFp8E4M3 = 10,
  kFp8E5M2 = 11,
};
constexpr int kNumDataTypes = 12;

inline size_t dataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    default:
      return 8;
  }
}

inline const char* dataTypeName(DataType type) {
  static const char* kNames[kNumDataTypes] = {"int8",    "uint8",    "int32",    "uint32",
                                              "int64",   "uint64",   "float16",  "float32",
                                              "float64", "bfloat16", "fp8_e4m3", "fp8_e5m2"};
  return kNames[static_cast<int>(type)];
}

// Runtime scaling around the binary operator: PreMulSum multiplies each rank's input by that rank's
// scalar before it is combined; Avg divides the final sum by the number of ranks.
struct ReduceScaling {
  bool preMultiply;          // PreMulSum
  bool scalarOnDevice;       // scalar is read through `deviceScalar` when the kernel runs
  const void* deviceScalar;  // points at one element of the reduction's type
  uint64_t hostScalarBits;   // the scalar's bits, when it was given on the host
  int postDivisor;           // Avg: the number of ranks; 1 otherwise
};

// The binary operator a reduction applies; Avg and PreMulSum are kSum plus ReduceScaling.
enum class BinaryOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

struct ReduceOp {
  BinaryOp op;
  ReduceScaling scaling;
};

}  // namespace mscclpp_nccl
