// Picks an algorithm and launch shape for each collective call.
#pragma once

#include <cuda_runtime.h>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/exchange.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

// What the selector knows about a communicator besides its packet transport.
struct SelectorContext {
  int maxBlocks;  // grid cap that keeps the kernels of all ranks sharing a GPU co-resident
};

Status runAllReduce(const PacketComm& comm, const SelectorContext& context, const AllReduceArgs& args,
                    cudaStream_t stream);
Status runExchange(const PacketComm& comm, const SelectorContext& context, const ExchangeArgs& args,
                   cudaStream_t stream);

}  // namespace mscclpp_nccl
