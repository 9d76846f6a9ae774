// Runs one collective call's plan (AlgorithmSelector::plan): the algorithm's launcher from the registry,
// or, for a mapped call, the zero-copy kernel that falls back on the plan's chunked schedule itself.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "native/algorithms/algorithm_selector.h"
#include "native/algorithms/transports.h"

namespace mscclpp_nccl {

// `windows`: null unless both buffers lie in mapped windows (an exchange: and exchangeMayUseWindows says
// its mapped plan may find them there). `mapped`: this rank's description of its
// buffers, for a mapped plan (else null). `*published` is set to args.ticket when the launched kernel
// publishes it at its end, else to 0.
Status runAllReduce(const Transports& transports, const CallPlan& plan, const AllReduceArgs& args,
                    const DirectBuffers* windows, const MappedCall* mapped, cudaStream_t stream,
                    uint64_t* published);
Status runExchange(const Transports& transports, const CallPlan& plan, const ExchangeArgs& args,
                   const MappedCall* mapped, const DirectBuffers* windows, cudaStream_t stream,
                   uint64_t* published);

}  // namespace mscclpp_nccl
