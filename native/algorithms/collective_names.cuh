// Empty types that put the collective into a kernel's symbol, which is the name profilers (Nsight
// Systems) show, where one kernel body serves several collectives: the exchange kernels run seven.
#pragma once

#include "native/algorithms/registry.h"

namespace mscclpp_nccl {

struct AllGather {};
struct ReduceScatter {};
struct AlltoAll {};
struct Broadcast {};
struct Reduce {};
struct Gather {};
struct Scatter {};

template <typename Name>
struct NameTag {
  using type = Name;
};

// Returns visit(NameTag<Name>{}) for a collective that reduces; only those two are instantiated.
template <typename Visit>
auto visitReducingCollective(Collective collective, Visit visit) {
  return collective == Collective::kReduce ? visit(NameTag<Reduce>{}) : visit(NameTag<ReduceScatter>{});
}

// Returns visit(NameTag<Name>{}) for a collective that only moves data.
template <typename Visit>
auto visitCopyingCollective(Collective collective, Visit visit) {
  switch (collective) {
    case Collective::kAlltoAll:
      return visit(NameTag<AlltoAll>{});
    case Collective::kBroadcast:
      return visit(NameTag<Broadcast>{});
    case Collective::kGather:
      return visit(NameTag<Gather>{});
    case Collective::kScatter:
      return visit(NameTag<Scatter>{});
    default:
      return visit(NameTag<AllGather>{});
  }
}

}  // namespace mscclpp_nccl
