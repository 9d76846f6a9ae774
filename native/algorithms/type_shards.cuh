// The build compiles each kernel source that includes this header once per shard (setup.py passes
// -DMSCCLPP_NCCL_TYPE_SHARD=k, k < kTypeShards): one source's kernels are instantiated for 12 types and
// several operators and collectives, and one compile of them all took minutes, so a change to one
// kernel rebuilt for minutes on any number of cores. Each compile (a "type shard") instantiates the
// kernels of one element type, or of one element type and some of its operators (shardOf); the source's
// host code, which launches them all, is compiled once, with shard 0 (MSCCLPP_NCCL_HOST_SHARD), and finds
// each call's kernel in the shard that holds it:
//
//   template <int kShard> Kernel myKernelOf(const Args&);      // declared for every shard
//   template <> Kernel myKernelOf<kThisTypeShard>(const Args& args) {  // defined by each compile
//     return dispatchReduce(args.type, args.op, heldKernels<Kernel>([](auto type, auto op) {...}));
//   }
//   #if MSCCLPP_NCCL_HOST_SHARD
//   ... withTypeShard(type, op, reduce, [&](auto shard) { return myKernelOf<decltype(shard)::value>(args); })
//   #endif
//
// A compile without the define (a tool that builds one source, perf/packet_kernel_bench.cu) holds every
// kernel and the host code: kThisTypeShard is kAllTypeShards.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "native/algorithms/reduce_dispatch.cuh"

namespace mscclpp_nccl {

template <typename... Ts>
struct ShardTypes {};

// Every type a kernel is instantiated for: the element types of reductions, in DataType's order, then
// the one raw type that only data movement uses (dispatchCopy moves 2-byte elements as uint16_t).
using KernelElementTypes = ShardTypes<int8_t, uint8_t, int32_t, uint32_t, int64_t, uint64_t, __half, float,
                                      double, __nv_bfloat16, __nv_fp8_e4m3, __nv_fp8_e5m2, uint16_t>;
// The operators of reductions, in dispatchReduce's order. Kernels that only move data use OpSum.
using KernelOperators = ShardTypes<OpSum, OpProd, OpMax, OpMin>;

template <typename T, typename... Ts>
constexpr int indexIn(ShardTypes<Ts...>) {
  constexpr bool matches[] = {std::is_same_v<T, Ts>...};
  for (int i = 0; i < static_cast<int>(sizeof...(Ts)); ++i)
    if (matches[i]) return i;
  return -1;
}

template <typename... Ts>
constexpr int countOf(ShardTypes<Ts...>) {
  return sizeof...(Ts);
}

template <typename... Ts>
constexpr int sizeAt(int index, ShardTypes<Ts...>) {
  constexpr int sizes[] = {static_cast<int>(sizeof(Ts))...};
  return sizes[index];
}

template <typename... Ts>
constexpr bool unsignedAt(int index, ShardTypes<Ts...>) {
  constexpr bool flags[] = {std::is_unsigned_v<Ts>...};
  return flags[index];
}

constexpr int kElementTypes = countOf(KernelElementTypes{});
constexpr int kReductionTypes = kNumDataTypes;  // KernelElementTypes before the raw type that only moves data
// Operator indices: KernelOperators', then one for kernels that only move data (dispatchCopy).
constexpr int kOpMaxIndex = indexIn<OpMax>(KernelOperators{}),
              kOpMinIndex = indexIn<OpMin>(KernelOperators{});
constexpr int kCopyIndex = countOf(KernelOperators{});

// Shards beyond one per type, for compiles that took as long as the rest of their source together:
// - a 1-byte type's reductions hold sixteen elements a unit: its Max and Min get a shard of their own;
// - a raw type that is also an element type of reductions (uint8_t, uint32_t, uint64_t) moves the data
//   of every type of its size: its copying kernels get a shard of their own.
constexpr bool hasMaxMinShard(int type) {
  return type < kReductionTypes && sizeAt(type, KernelElementTypes{}) == 1;
}
constexpr bool hasCopyShard(int type) {
  return type < kReductionTypes && unsignedAt(type, KernelElementTypes{});
}

// The shard that holds the kernels of element type `type` and operator `op` (indices in the lists above,
// or kCopyIndex): the type's own, else one of the extra shards, numbered after the types' in the order
// above. shardOf(-1, -1) is the number of shards.
constexpr int shardOf(int type, int op) {
  const bool maxOrMin = op == kOpMaxIndex || op == kOpMinIndex;
  int extra = kElementTypes;  // the next extra shard's number
  for (int t = 0; t < kElementTypes; ++t)
    if (hasMaxMinShard(t)) {
      if (t == type && maxOrMin) return extra;
      ++extra;
    }
  for (int t = 0; t < kElementTypes; ++t)
    if (hasCopyShard(t)) {
      if (t == type && op == kCopyIndex) return extra;
      ++extra;
    }
  return type < 0 ? extra : type;
}

// setup.py reads this number: it compiles a source that includes this header that many times.
constexpr int kTypeShards = 20;
static_assert(shardOf(-1, -1) == kTypeShards, "kTypeShards: one shard per element type, and the extra ones");
constexpr int kAllTypeShards = -1;

#ifdef MSCCLPP_NCCL_TYPE_SHARD
constexpr int kThisTypeShard = MSCCLPP_NCCL_TYPE_SHARD;
#define MSCCLPP_NCCL_HOST_SHARD (MSCCLPP_NCCL_TYPE_SHARD == 0)
// A shard that holds no kernel of a source (an all-reduce's in the raw 2-byte type's shard) leaves its
// helpers unused, by design.
#pragma nv_diag_suppress declared_but_not_referenced
#else
constexpr int kThisTypeShard = kAllTypeShards;
#define MSCCLPP_NCCL_HOST_SHARD 1
#endif
static_assert(kThisTypeShard == kAllTypeShards || (kThisTypeShard >= 0 && kThisTypeShard < kTypeShards),
              "MSCCLPP_NCCL_TYPE_SHARD out of range");

// What a dispatch tag says about the kernel (reduce_dispatch.cuh, collective_names.cuh): the index of
// its element type or operator, or -1 for any other tag (a collective's name, std::true_type).
template <typename Tag>
constexpr int elementIndexOf(Tag) {
  return -1;
}
template <typename T>
constexpr int elementIndexOf(TypeTag<T>) {
  return indexIn<T>(KernelElementTypes{});
}
template <typename Tag>
constexpr int operatorIndexOf(Tag) {
  return -1;
}
template <typename T>
constexpr int operatorIndexOf(TypeTag<T>) {
  return indexIn<T>(KernelOperators{});
}
constexpr int operatorIndexOf(std::false_type) {  // the exchanges' tag of a kernel that does not reduce
  return kCopyIndex;
}

// The shard that holds the kernel that dispatch tags `Tags` pick: that of their element type and
// operator (OpSum where none is given; kCopyIndex where the kernel does not reduce); -1 without a type.
template <typename... Tags>
constexpr int shardOfTags() {
  int type = -1, op = 0;
  ((type = type >= 0 ? type : elementIndexOf(Tags{})), ...);
  ((op = op == kCopyIndex || operatorIndexOf(Tags{}) < 0 ? op : operatorIndexOf(Tags{})), ...);
  return type < 0 ? -1 : shardOf(type, op);
}

// Whether this compile instantiates the kernel that dispatch tags `Tags` pick.
template <typename... Tags>
constexpr bool holdsKernel() {
  constexpr int shard = shardOfTags<Tags...>();
  static_assert(shard >= 0, "a kernel dispatched without an element type of KernelElementTypes");
  return kThisTypeShard == kAllTypeShards || shard == kThisTypeShard;
}

// A visitor for the typed dispatch (reduce_dispatch.cuh, collective_names.cuh) that returns
// pick(tags...), a kernel, where this compile holds it, and null elsewhere.
template <typename Kernel, typename Pick>
auto heldKernels(Pick pick) {
  return [pick](auto... tags) -> Kernel {
    if constexpr (holdsKernel<decltype(tags)...>())
      return pick(tags...);
    else
      return nullptr;
  };
}

// The shard that holds the kernel of a call on `type` with operator `op`: its own type's where the kernel
// reduces, the raw type of its size where it only moves data (reduce_dispatch.cuh: dispatchCopy).
inline int typeShardOf(DataType type, BinaryOp op, bool reduce) {
  auto element = [](auto tag) { return indexIn<Tagged<decltype(tag)>>(KernelElementTypes{}); };
  if (!reduce)
    return dispatchCopy(dataTypeSize(type),
                        [&](auto raw, auto) { return shardOf(element(raw), kCopyIndex); });
  return dispatchReduce(type, op, [&](auto tag, auto op) {
    return shardOf(element(tag), indexIn<Tagged<decltype(op)>>(KernelOperators{}));
  });
}

template <typename Visit, int... kShards>
auto visitTypeShard(int shard, Visit visit, std::integer_sequence<int, kShards...>) {
  decltype(visit(std::integral_constant<int, 0>{})) result{};
  ((shard == kShards && (result = visit(std::integral_constant<int, kShards>{}), true)) || ...);
  return result;
}

// Returns visit(std::integral_constant<int, shard>{}) for the shard that holds the kernel of a call on
// `type` with operator `op` (typeShardOf): the host code's way to it. In a compile of every type,
// visit(kAllTypeShards).
template <typename Visit>
auto withTypeShard(DataType type, BinaryOp op, bool reduce, Visit visit) {
  if constexpr (kThisTypeShard == kAllTypeShards)
    return visit(std::integral_constant<int, kAllTypeShards>{});
  else
    return visitTypeShard(typeShardOf(type, op, reduce), visit,
                          std::make_integer_sequence<int, kTypeShards>{});
}

}  // namespace mscclpp_nccl
