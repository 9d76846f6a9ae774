// What a routed communicator (native/routed_communicator.h) needs of the intra-host communicator it runs
// its steps on: the collectives and the error and abort paths. Communicator implements it; the routed
// side depends on this interface, not on Communicator, so that the arrows point one way.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/exchange.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

class CollectiveComm {
 public:
  virtual ~CollectiveComm() = default;

  virtual int rank() const = 0;
  // Device memory it holds (ncclCommMemStats).
  virtual size_t deviceBytes() const = 0;
  // Each enqueues on `stream` and never synchronizes the host.
  virtual Status allReduce(const AllReduceArgs& args, cudaStream_t stream) = 0;
  virtual Status exchange(const ExchangeArgs& args, cudaStream_t stream) = 0;
  // kRemoteError naming a lost peer, else the first failure its kernels reported, else kSuccess.
  virtual Status asyncError() const = 0;
  // Makes its waiting kernels give up, making no CUDA call.
  virtual void stopKernels() = 0;
  // Makes every waiting kernel and bootstrap call give up promptly.
  virtual void abort() = 0;
};

}  // namespace mscclpp_nccl
