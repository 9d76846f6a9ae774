// Element types and reduction operators shared by every reducing kernel.
//
// Reductions accumulate in `Acc` (float for 16- and 8-bit floats, the type itself otherwise) and round
// once at the end, so every rank that reduces the same inputs in the same (rank) order gets the same
// bits, and low-precision sums are at least as accurate as pairwise rounding. Integer arithmetic wraps
// like the hardware does.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "native/common/data_type.h"

namespace mscclpp_nccl {

template <typename T>
struct ElementTraits {
  using Acc = T;
  static __device__ __forceinline__ Acc toAcc(T v) { return v; }
  static __device__ __forceinline__ T fromAcc(Acc v) { return static_cast<T>(v); }
};

template <>
struct ElementTraits<__half> {
  using Acc = float;
  static __device__ __forceinline__ Acc toAcc(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half fromAcc(Acc v) { return __float2half_rn(v); }
};

template <>
struct ElementTraits<__nv_bfloat16> {
  using Acc = float;
  static __device__ __forceinline__ Acc toAcc(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 fromAcc(Acc v) { return __float2bfloat16_rn(v); }
};

template <>
struct ElementTraits<__nv_fp8_e4m3> {
  using Acc = float;
  static __device__ __forceinline__ Acc toAcc(__nv_fp8_e4m3 v) { return static_cast<float>(v); }
  static __device__ __forceinline__ __nv_fp8_e4m3 fromAcc(Acc v) { return __nv_fp8_e4m3(v); }
};

template <>
struct ElementTraits<__nv_fp8_e5m2> {
  using Acc = float;
  static __device__ __forceinline__ Acc toAcc(__nv_fp8_e5m2 v) { return static_cast<float>(v); }
  static __device__ __forceinline__ __nv_fp8_e5m2 fromAcc(Acc v) { return __nv_fp8_e5m2(v); }
};

// The four binary operators. Avg and PreMulSum are Sum with a scaling step (see ReduceScaling).
struct OpSum {
  template <typename A>
  static __device__ __forceinline__ A apply(A a, A b) {
    return a + b;
  }
};
struct OpProd {
  template <typename A>
  static __device__ __forceinline__ A apply(A a, A b) {
    return a * b;
  }
};
struct OpMax {
  template <typename A>
  static __device__ __forceinline__ A apply(A a, A b) {
    return a > b ? a : b;
  }
};
struct OpMin {
  template <typename A>
  static __device__ __forceinline__ A apply(A a, A b) {
    return a < b ? a : b;
  }
};

template <typename T>
__device__ __forceinline__ typename ElementTraits<T>::Acc loadScalar(const ReduceScaling& s) {
  T value;
  if (s.scalarOnDevice) {
    value = *static_cast<const T*>(s.deviceScalar);
  } else {
    memcpy(&value, &s.hostScalarBits, sizeof(T));
  }
  return ElementTraits<T>::toAcc(value);
}

// Eight bytes of elements: the payload of one LL packet and the unit every packet kernel moves.
template <typename T>
struct Word {
  static constexpr int kElems = 8 / sizeof(T);
  using Acc = typename ElementTraits<T>::Acc;

  static __device__ __forceinline__ void unpack(uint2 bits, Acc (&out)[kElems]) {
    const T* elems = reinterpret_cast<const T*>(&bits);
#pragma unroll
    for (int i = 0; i < kElems; ++i) out[i] = ElementTraits<T>::toAcc(elems[i]);
  }

  static __device__ __forceinline__ uint2 pack(const Acc (&in)[kElems]) {
    uint2 bits;
    T* elems = reinterpret_cast<T*>(&bits);
#pragma unroll
    for (int i = 0; i < kElems; ++i) elems[i] = ElementTraits<T>::fromAcc(in[i]);
    return bits;
  }

  // Multiplies every element by `scalar` in Acc and rounds back (PreMulSum's per-rank step).
  static __device__ __forceinline__ uint2 scale(uint2 bits, Acc scalar) {
    Acc values[kElems];
    unpack(bits, values);
#pragma unroll
    for (int i = 0; i < kElems; ++i) values[i] = values[i] * scalar;
    return pack(values);
  }
};

// PreMulSum's per-rank factor, applied to what a rank contributes to a reduction; off (factor 1, never
// applied) for every other operator and for data that is only moved.
template <typename T>
struct PreMultiply {
  bool on;
  typename ElementTraits<T>::Acc factor;

  __device__ PreMultiply(const ReduceScaling& scaling, bool reduces)
      : on(reduces && scaling.preMultiply),
        factor(on ? loadScalar<T>(scaling) : typename ElementTraits<T>::Acc(1)) {}
  __device__ __forceinline__ uint2 apply(uint2 bits) const {
    return on ? Word<T>::scale(bits, factor) : bits;
  }
};

template <int kSize>
struct RawElement;
template <>
struct RawElement<1> {
  using type = uint8_t;
};
template <>
struct RawElement<2> {
  using type = uint16_t;
};
template <>
struct RawElement<4> {
  using type = uint32_t;
};
template <>
struct RawElement<8> {
  using type = uint64_t;
};

// Copies the `bytes` (<= 8) bytes of a word element by element. Bytes are copied in a loop the compiler
// keeps rolled: unrolled, the eight guarded byte moves of each of the many call sites doubled the compile
// time of every kernel of a 1-byte type (this path serves only buffers at odd addresses and a chunk's
// last word).
template <typename Raw>
__device__ __forceinline__ void copyElements(Raw* dst, const Raw* src, size_t bytes) {
  if constexpr (sizeof(Raw) == 1) {
#pragma unroll 1
    for (size_t i = 0; i < bytes; ++i) dst[i] = src[i];
  } else {
    for (size_t i = 0; i < bytes / sizeof(Raw); ++i) dst[i] = src[i];
  }
}

// Whether whole words of a buffer at `p` move in one 8-byte access.
__device__ __forceinline__ bool wordAligned(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 7) == 0;
}

// Copies the `bytes` (<= 8) bytes of word `index` of a buffer. Whole words of 8-byte aligned buffers
// move in one access; the rest move element by element (buffers may sit at any element offset).
template <typename T>
__device__ __forceinline__ uint2 loadWord(const char* base, size_t index, size_t totalBytes, bool aligned) {
  size_t offset = index * 8;
  size_t bytes = totalBytes - offset < 8 ? totalBytes - offset : 8;
  if (aligned && bytes == 8) return *reinterpret_cast<const uint2*>(base + offset);
  using Raw = typename RawElement<sizeof(T)>::type;
  uint2 bits = make_uint2(0, 0);
  Raw* dst = reinterpret_cast<Raw*>(&bits);
  const Raw* src = reinterpret_cast<const Raw*>(base + offset);
  copyElements<Raw>(dst, src, bytes);
  return bits;
}

template <typename T>
__device__ __forceinline__ void storeWord(char* base, size_t index, size_t totalBytes, bool aligned,
                                          uint2 bits) {
  size_t offset = index * 8;
  size_t bytes = totalBytes - offset < 8 ? totalBytes - offset : 8;
  if (aligned && bytes == 8) {
    *reinterpret_cast<uint2*>(base + offset) = bits;
    return;
  }
  using Raw = typename RawElement<sizeof(T)>::type;
  const Raw* src = reinterpret_cast<const Raw*>(&bits);
  Raw* dst = reinterpret_cast<Raw*>(base + offset);
  copyElements<Raw>(dst, src, bytes);
}

// Sixteen bytes of elements, as two words: the unit every chunked (bandwidth) kernel moves.
struct Unit {
  uint2 lo;
  uint2 hi;
};

// How a buffer may be accessed by units: 16 (one vector access), 8 (two word accesses) or 1 (elements).
__device__ __forceinline__ int unitAlignment(const void* pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  return (address & 15) == 0 ? 16 : (address & 7) == 0 ? 8 : 1;
}

// Unit `index` of a buffer of `totalBytes` bytes; bytes past the end read as zero. Loads bypass L1
// (.cg), so data a peer wrote after this block last looked is never served stale.
template <typename T>
__device__ __forceinline__ Unit loadUnit(const char* base, size_t index, size_t totalBytes, int alignment) {
  size_t offset = index * 16;
  if (alignment == 16 && totalBytes - offset >= 16) {
    uint4 v = __ldcg(reinterpret_cast<const uint4*>(base + offset));
    return Unit{make_uint2(v.x, v.y), make_uint2(v.z, v.w)};
  }
  Unit unit;
  unit.lo = loadWord<T>(base, 2 * index, totalBytes, alignment >= 8);
  unit.hi = offset + 8 < totalBytes ? loadWord<T>(base, 2 * index + 1, totalBytes, alignment >= 8)
                                    : make_uint2(0, 0);
  return unit;
}

template <typename T>
__device__ __forceinline__ void storeUnit(char* base, size_t index, size_t totalBytes, int alignment,
                                          Unit unit) {
  size_t offset = index * 16;
  if (alignment == 16 && totalBytes - offset >= 16) {
    __stcg(reinterpret_cast<uint4*>(base + offset), make_uint4(unit.lo.x, unit.lo.y, unit.hi.x, unit.hi.y));
    return;
  }
  storeWord<T>(base, 2 * index, totalBytes, alignment >= 8, unit.lo);
  if (offset + 8 < totalBytes) storeWord<T>(base, 2 * index + 1, totalBytes, alignment >= 8, unit.hi);
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
