// The collectives' names on the host: nccl-tests' names, which the tuning table, MSCCLPP_NCCL_ALGO and
// the logs use. Apart from the registry, so that a tool linking a few kernels need not link every launcher.
#include <string>

#include "native/algorithms/registry.h"

namespace mscclpp_nccl {
namespace {

const char* const kCollectiveNames[kNumCollectives] = {"all_reduce", "all_gather", "reduce_scatter",
                                                       "alltoall",   "broadcast",  "reduce",
                                                       "gather",     "scatter",    "sendrecv"};

}  // namespace

const char* collectiveName(Collective collective) { return kCollectiveNames[static_cast<int>(collective)]; }

bool collectiveFromName(const std::string& name, Collective* out) {
  for (int c = 0; c < kNumCollectives; ++c) {
    if (name == kCollectiveNames[c]) {
      *out = static_cast<Collective>(c);
      return true;
    }
  }
  return false;
}

}  // namespace mscclpp_nccl
