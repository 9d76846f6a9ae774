// Whether this rank's GPU can map the memory of every other GPU of its host that the communicator uses:
// our transport needs that (CUDA IPC between GPUs is peer access). Without it the communicator goes
// through stock NCCL instead of failing (native/fallback/DESIGN.md; native/communicator.cc decides).
#pragma once

#include "native/transport/rank_info.h"

namespace mscclpp_nccl {

// Whether some host of the communicator holds ranks on two GPUs or more: only then is peer access a
// question. The same answer on every rank (it reads the exchanged table).
bool hostSpansGpus(const Topology& topology);

// False when some rank on this physical host uses a GPU other than ours that this process sees and
// cannot reach by peer access. A GPU this process does not see is taken as reachable: there is nothing
// to ask, and the transport reports its own error if IPC then fails.
bool peerGpusReachable(const Topology& topology, int myRank, int cudaDevice);

}  // namespace mscclpp_nccl
