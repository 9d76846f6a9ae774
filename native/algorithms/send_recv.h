// Runs one pass of a group's sends and receives: small transfers in packet kernels, large ones over
// chunk channels in chunked kernels (each classified by its size alone, so both ends put it in the same
// kernel).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "native/algorithms/algorithm_selector.h"
#include "native/algorithms/transports.h"

namespace mscclpp_nccl {

// *published: `ticket` when the pass's last kernel publishes it (a packet kernel), else 0.
Status runSendRecv(const Transports& transports, const AlgorithmSelector& selector,
                   const std::vector<P2pOp>& ops, uint64_t ticket, cudaStream_t stream, uint64_t* published);

}  // namespace mscclpp_nccl
