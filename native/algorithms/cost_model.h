// A model of how long a call takes, for ncclGroupSimulateEnd (schedulers such as PyTorch's inductor ask
// for one before they order work). Nothing is timed: the path a call's plan takes costs a fixed time,
// growing with the ranks it waits for, plus the bytes the call must move at a share of that path's rate.
//
// Ranks that share one GPU share its memory: a call costs its whole traffic (each byte read or written
// once, by every rank together) at the GPU's copy rate times the path's efficiency. The constants were
// fitted to nccl-tests runs of 2, 4 and 8 ranks on one H100 and one H200 (perf/), where the model lies
// within a factor of 2 of almost every measured size; tests/test_cost_model.py holds it to that. Ranks on
// separate GPUs are modelled on NVLink's bus bandwidth, and over several hosts on one 200 Gb/s NIC per
// rank: no run here has measured either.
#pragma once

#include <cstddef>
#include <string>

#include "native/algorithms/collective.h"
#include "native/algorithms/registry.h"

namespace mscclpp_nccl {

// How a call moves its bytes, as far as its cost goes.
enum class CostPath { kPacket, kChunked, kMapped };

class CostModel {
 public:
  CostModel() = default;
  // `ranksPerGpu`: the most ranks any GPU of the communicator holds; `hosts`: how many hosts it spans.
  CostModel(const std::string& gpuName, int nranks, int ranksPerGpu, int hosts);

  // A collective of `bytes` (CallShape::bytes: the message of an all-reduce, else the range per rank).
  double collectiveMicroseconds(Collective collective, size_t bytes, CostPath path) const;
  // A group's point-to-point transfers on one communicator, which run as one kernel: `sentBytes` and
  // `receivedBytes` are the sums of its sends and of its receives.
  double transfersMicroseconds(size_t sentBytes, size_t receivedBytes, CostPath path) const;

 private:
  double fixedMicroseconds(CostPath path) const;
  double transferMicroseconds(double sharedGpuBytes, double busBytes, CostPath path, bool reduces) const;

  int nranks_ = 1;
  bool oneGpu_ = true;
  int hosts_ = 1;
  double copyBytesPerUs_ = 3.0e6;
};

// The cost path of an algorithm, or of a mapped (zero-copy) call.
CostPath costPathOf(const Algorithm& algorithm, bool mapped);

}  // namespace mscclpp_nccl
