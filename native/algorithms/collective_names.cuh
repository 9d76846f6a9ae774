// Empty types that put the collective into a kernel's symbol, which is the name profilers (Nsight
// Systems) show, where one kernel serves several collectives and its code depends on which: the packet
// exchange kernels run seven, the two-shot packet kernel all-reduce and reduce. Kernels whose code is the
// same for every collective they serve (the chunked and zero-copy exchanges) are compiled once and named
// by what they do, reduce or move (dispatchExchangeWork): each name is another compile of the same code,
// and the NVTX range of the call (shim/nvtx_range.h) names the collective in a profile.
#pragma once

#include <type_traits>

#include "native/algorithms/collective.h"
#include "native/algorithms/reduce_dispatch.cuh"

namespace mscclpp_nccl {

template <Collective kValue>
struct NameOf {
  static constexpr Collective kCollective = kValue;
};

struct AllReduce : NameOf<Collective::kAllReduce> {};
struct AllGather : NameOf<Collective::kAllGather> {};
struct ReduceScatter : NameOf<Collective::kReduceScatter> {};
struct AlltoAll : NameOf<Collective::kAlltoAll> {};
struct Broadcast : NameOf<Collective::kBroadcast> {};
struct Reduce : NameOf<Collective::kReduce> {};
struct Gather : NameOf<Collective::kGather> {};
struct Scatter : NameOf<Collective::kScatter> {};

// Returns visit(TypeTag<Name>{}) for a collective that reduces; only those two are instantiated.
template <typename Visit>
auto visitReducingCollective(Collective collective, Visit visit) {
  return collective == Collective::kReduce ? visit(TypeTag<Reduce>{}) : visit(TypeTag<ReduceScatter>{});
}

// Returns visit(TypeTag<Name>{}) for a collective that only moves data.
template <typename Visit>
auto visitCopyingCollective(Collective collective, Visit visit) {
  switch (collective) {
    case Collective::kAlltoAll:
      return visit(TypeTag<AlltoAll>{});
    case Collective::kBroadcast:
      return visit(TypeTag<Broadcast>{});
    case Collective::kGather:
      return visit(TypeTag<Gather>{});
    case Collective::kScatter:
      return visit(TypeTag<Scatter>{});
    default:
      return visit(TypeTag<AllGather>{});
  }
}

// Returns launch(name, reduce, type, op) for an exchange kernel: tags of the collective that names it,
// of whether it reduces (std::true_type or std::false_type), and of its element type and operator
// (reduce_dispatch.cuh). Copying kernels move raw words of the element's size.
template <typename Launch>
auto dispatchExchange(Collective collective, bool reduce, DataType type, BinaryOp op, Launch launch) {
  if (reduce)
    return visitReducingCollective(collective, [&](auto name) {
      return dispatchReduce(type, op, [&](auto t, auto o) { return launch(name, std::true_type{}, t, o); });
    });
  return visitCopyingCollective(collective, [&](auto name) {
    return dispatchCopy(dataTypeSize(type),
                        [&](auto t, auto o) { return launch(name, std::false_type{}, t, o); });
  });
}

// Returns launch(reduce, type, op) for an exchange kernel that no collective names: tags of whether it
// reduces (std::true_type or std::false_type), of its element type and of its operator.
template <typename Launch>
auto dispatchExchangeWork(bool reduce, DataType type, BinaryOp op, Launch launch) {
  if (reduce) return dispatchReduce(type, op, [&](auto t, auto o) { return launch(std::true_type{}, t, o); });
  return dispatchCopy(dataTypeSize(type), [&](auto t, auto o) { return launch(std::false_type{}, t, o); });
}

}  // namespace mscclpp_nccl
