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

// What a large send offers its receiver to pull (p2p.h): the communicator describes the buffer, and only
// for the sends that go on chunks and open with a descriptor, so that no other buffer is exported.
class SendSources {
 public:
  virtual MappedBuffer describe(const P2pOp& send) = 0;

 protected:
  ~SendSources() = default;
};

// *published: `ticket` when the pass's last kernel publishes it (a packet kernel), else 0. `sources`
// may be null: then no send is offered, and every chunked transfer moves through the chunks.
Status runSendRecv(const Transports& transports, const AlgorithmSelector& selector,
                   const std::vector<P2pOp>& ops, uint64_t ticket, cudaStream_t stream, SendSources* sources,
                   uint64_t* published);

}  // namespace mscclpp_nccl
