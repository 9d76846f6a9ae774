// The collectives, as every layer from the kernels up names them. Apart from the registry (registry.h),
// whose host-side tables kernel sources need not parse.
#pragma once

namespace mscclpp_nccl {

enum class Collective : int {
  kAllReduce = 0,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kSendRecv,
};
constexpr int kNumCollectives = 9;

// nccl-tests' names: all_reduce, all_gather, ..., sendrecv (collective_names.cc).
const char* collectiveName(Collective collective);

}  // namespace mscclpp_nccl
