// The host a rank announces at communicator init, in two forms:
//  - physical: a hash of the host name and boot id. It decides what CUDA IPC and descriptor passing may
//    reach (sameProcess, sameGpu, ranksOnMyGpu), so it never changes with a setting.
//  - layout: the host the hierarchical path groups ranks by (one intra-host communicator per layout host,
//    native/fallback/hierarchy.h and DESIGN.md there). It is the physical one unless MSCCLPP_NCCL_HOST_ID is
//    set, which lets tests cut one machine into fake hosts (4 ranks as 2 hosts of 2). Read by
//    Communicator::connect.
#pragma once

#include <cstdint>
#include <string>

namespace mscclpp_nccl {

uint64_t physicalHostId();

// The layout host of a rank on `physical` whose MSCCLPP_NCCL_HOST_ID is `override` ("" = unset). The
// override only splits a physical host, never joins two: the same text exported on every node of a real
// cluster must not put ranks of different machines in one intra-host communicator, which needs CUDA IPC.
uint64_t layoutHostId(uint64_t physical, const std::string& override);

// layoutHostId with this process's MSCCLPP_NCCL_HOST_ID.
uint64_t layoutHostIdFromEnv(uint64_t physical);

// The NCCL_HOSTID that makes the private stock NCCL see the same hosts as the layout: "" when the
// layout host is the physical one (stock finds that itself), else a name of the layout host.
std::string stockHostId(uint64_t physical, uint64_t layout);

}  // namespace mscclpp_nccl
