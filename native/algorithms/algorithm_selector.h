// Picks an algorithm and launch shape for each call: MSCCLPP_NCCL_ALGO (forced, for experiments)
// first, then the tuning table (MSCCLPP_NCCL_TUNING_FILE, else the one shipped with the package),
// then built-in rules. Every rank of a communicator must choose alike, so the communicator checks
// at init that all ranks see the same overrides (fingerprint()) and drops them everywhere if not.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <string>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/exchange.h"
#include "native/algorithms/registry.h"
#include "native/algorithms/tuning_table.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

struct Choice {
  const Algorithm* algorithm;
  LaunchShape shape;
  const char* source;  // "forced", "table" or "rules"
};

class AlgorithmSelector {
 public:
  // `maxBlocks` keeps every rank's kernels co-resident.
  void init(const std::string& gpuName, int nranks, int ranksPerGpu, int maxBlocks);
  // Packets per scratch slot: the largest chunk a block moves per peer and step.
  void setSlotPackets(size_t slotPackets) { slotPackets_ = slotPackets; }
  // A hash of everything that can override the built-in rules here (the same on all ranks or none).
  uint64_t fingerprint() const { return fingerprint_; }
  void dropOverrides();

  Choice choose(Collective collective, size_t elementBytes, size_t bytes) const;
  int maxBlocks() const { return maxBlocks_; }

 private:
  struct Forced {
    const Algorithm* algorithm = nullptr;
    TuningChoice choice;
  };
  bool parseForced(const std::string& text);
  LaunchShape shapeFor(const Algorithm& algorithm, const TuningChoice& choice, size_t bytes) const;

  int nranks_ = 1;
  int maxBlocks_ = 1;
  size_t slotPackets_ = 1;
  std::array<Forced, kNumCollectives> forced_{};
  TuningTable table_;
  uint64_t fingerprint_ = 0;
};

Status runAllReduce(const PacketComm& comm, const AlgorithmSelector& selector, const AllReduceArgs& args,
                    cudaStream_t stream);
Status runExchange(const PacketComm& comm, const AlgorithmSelector& selector, Collective collective,
                   const ExchangeArgs& args, cudaStream_t stream);

}  // namespace mscclpp_nccl
