// The build compiles each kernel source that includes this header once per element type (setup.py passes
// -DMSCCLPP_NCCL_TYPE_SHARD=k, k < kTypeShards): one source's kernels are instantiated for 12 types and
// several operators and collectives, and one compile of them all took minutes, so a change to one
// kernel rebuilt for minutes on any number of cores. Each compile (a "type shard") instantiates the
// kernels of one element type; the source's host code, which launches them all, is compiled once, with
// shard 0 (MSCCLPP_NCCL_HOST_SHARD), and finds each call's kernel in the shard that holds its type:
//
//   template <int kShard> Kernel myKernelOf(const Args&);      // declared for every shard
//   template <> Kernel myKernelOf<kThisTypeShard>(const Args& args) {  // defined by each compile
//     return dispatchReduce(args.type, args.op, heldKernels<Kernel>([](auto type, auto op) {...}));
//   }
//   #if MSCCLPP_NCCL_HOST_SHARD
//   ... withTypeShard(type, reduce, [&](auto shard) { return myKernelOf<decltype(shard)::value>(args); })
//   #endif
//
// A compile without the define (a tool that builds one source, perf/packet_kernel_bench.cu) holds every
// type and the host code: kThisTypeShard is kAllTypeShards.
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

// setup.py reads this number: it compiles a source that includes this header that many times.
constexpr int kTypeShards = 13;
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

template <typename T, typename... Ts>
constexpr int shardIndex(ShardTypes<Ts...>) {
  constexpr bool matches[] = {std::is_same_v<T, Ts>...};
  for (int i = 0; i < static_cast<int>(sizeof...(Ts)); ++i)
    if (matches[i]) return i;
  return -1;
}

// The shard that holds the kernels of element type T.
template <typename T>
constexpr int kTypeShardOf = shardIndex<T>(KernelElementTypes{});

template <typename... Ts>
constexpr int countShardTypes(ShardTypes<Ts...>) {
  return sizeof...(Ts);
}
static_assert(countShardTypes(KernelElementTypes{}) == kTypeShards, "one shard per kernel element type");

// Whether this compile instantiates the kernels of element type T.
template <typename T>
constexpr bool holdsType() {
  static_assert(kTypeShardOf<T> >= 0, "a kernel element type missing from KernelElementTypes");
  return kThisTypeShard == kAllTypeShards || kTypeShardOf<T> == kThisTypeShard;
}

// Whether this compile holds the kernels a dispatch tag asks for: a TypeTag of an element type only where
// holdsType; any other tag (a collective's or an operator's TypeTag, std::true_type) asks for nothing.
template <typename Tag>
constexpr bool heldTag(Tag) {
  return true;
}
template <typename T>
constexpr bool heldTag(TypeTag<T>) {
  if constexpr (kTypeShardOf<T> >= 0)
    return holdsType<T>();
  else
    return true;
}

// A visitor for the typed dispatch (reduce_dispatch.cuh, collective_names.cuh) that returns
// pick(tags...), a kernel, where this compile holds the tags' element type, and null elsewhere.
template <typename Kernel, typename Pick>
auto heldKernels(Pick pick) {
  return [pick](auto... tags) -> Kernel {
    if constexpr ((heldTag(decltype(tags){}) && ...))
      return pick(tags...);
    else
      return nullptr;
  };
}

// The shard that holds the kernels of a call on `type`: its own type's where the kernel reduces, the raw
// type of its size where it only moves data (reduce_dispatch.cuh: dispatchCopy).
inline int typeShardOf(DataType type, bool reduce) {
  auto shard = [](auto element, auto) { return kTypeShardOf<Tagged<decltype(element)>>; };
  return reduce ? dispatchReduce(type, BinaryOp::kSum, shard) : dispatchCopy(dataTypeSize(type), shard);
}

template <typename Visit, int... kShards>
auto visitTypeShard(int shard, Visit visit, std::integer_sequence<int, kShards...>) {
  decltype(visit(std::integral_constant<int, 0>{})) result{};
  ((shard == kShards && (result = visit(std::integral_constant<int, kShards>{}), true)) || ...);
  return result;
}

// Returns visit(std::integral_constant<int, shard>{}) for the shard that holds the kernels of a call on
// `type` (typeShardOf): the host code's way to them. In a compile of every type, visit(kAllTypeShards).
template <typename Visit>
auto withTypeShard(DataType type, bool reduce, Visit visit) {
  if constexpr (kThisTypeShard == kAllTypeShards)
    return visit(std::integral_constant<int, kAllTypeShards>{});
  else
    return visitTypeShard(typeShardOf(type, reduce), visit, std::make_integer_sequence<int, kTypeShards>{});
}

}  // namespace mscclpp_nccl
