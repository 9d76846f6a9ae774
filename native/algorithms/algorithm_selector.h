// Picks an algorithm and launch shape for each call: MSCCLPP_NCCL_ALGO (forced, for experiments)
// first, then the tuning table (MSCCLPP_NCCL_TUNING_FILE, else the one shipped with the package),
// then built-in rules. Every rank of a communicator must choose alike, so the communicator checks
// at init that all ranks see the same overrides (fingerprint()) and drops them everywhere if not.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/cost_model.h"
#include "native/algorithms/exchange.h"
#include "native/algorithms/forced_algorithms.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/registry.h"
#include "native/algorithms/tuning_table.h"
#include "native/common/status.h"
#include "native/transport/block_share.h"

namespace mscclpp_nccl {

struct Choice {
  const Algorithm* algorithm;
  LaunchShape shape;
  const char* source;  // "forced", "table" or "rules"
};

// What a call is, as far as choosing for it goes.
struct CallShape {
  Collective collective;
  size_t elementBytes;
  size_t bytes;      // all_reduce: the message; an exchange: the range per rank
  bool inWindows;    // all_reduce: both buffers lie in windows every rank mapped
  bool preMultiply;  // PreMulSum: each rank's scalar is its own, so peers' inputs are never read raw
};

// One call's plan, decided once: the kernel that runs and its grid.
struct CallPlan {
  const Algorithm* algorithm;  // a mapped call: the chunked schedule it runs where buffers are not mapped
  LaunchShape shape;           // the grid launched
  LaunchShape scratch;         // a mapped call: the grid of that chunked schedule, within `shape`
  bool mapped;                 // zero-copy on buffers outside windows (transport/mapped_allocations.h)
  const char* source;          // "forced", "table" or "rules"
  size_t bytes;                // the call's message on this rank (CallShape::bytes), which it was made for
};

class AlgorithmSelector {
 public:
  // `residentBlocks` (the grid the ranks agreed on, transport/block_share.h) keeps every rank's kernels
  // co-resident: no grid is larger. `gpuArch` ("sm_90") lets the tuning table's entries for another GPU
  // of the architecture stand in for one it does not name.
  void init(const std::string& gpuName, const std::string& gpuArch, int nranks, int ranksPerGpu,
            int residentBlocks);
  // Packets per scratch slot: the largest chunk a packet kernel's block moves per peer and step.
  void setSlotPackets(size_t slotPackets) { slotPackets_ = slotPackets; }
  // Bytes of one chunk slot, the largest chunk of a chunked kernel (0: no chunk channels, no chunked
  // algorithms).
  void setChunkSlotBytes(size_t slotBytes) { chunkSlotBytes_ = slotBytes; }
  // Whether small grids may start while the stream's previous kernel runs (kernel_launch.h).
  void setEarlyLaunch(bool allowed) { earlyLaunch_ = allowed; }
  // The largest grid from the next call on (transport/block_share.h: a parent gives blocks to a split child).
  void setResidentBlocks(int blocks) { residentBlocks_ = std::max(1, blocks); }
  // Whether the communicator shares users' allocations with the peers (transport/mapped_allocations.h).
  void setMapsBuffers(bool enabled) { mapsBuffers_ = enabled; }
  // A hash of everything that can override the built-in rules here (the same on all ranks or none).
  uint64_t fingerprint() const { return fingerprint_; }
  void dropOverrides();

  // The plan of one call. Every rank reaches the same plan for the same call.
  CallPlan plan(const CallShape& call) const;
  // How the call's plan moves its bytes, for its modeled time (cost_model.h). A transfer (kSendRecv, `bytes`
  // its largest send or receive) is mapped where large sends are pulled from the sender's buffer (p2p.h).
  CostPath costPath(const CallShape& call) const;
  // `registered`: the call's buffers lie in windows that every rank mapped (zero-copy is possible).
  Choice choose(Collective collective, size_t elementBytes, size_t bytes, bool registered = false) const;
  // Whether a call outside windows goes through a mapped zero-copy kernel (which runs the chunked schedule
  // itself for calls where some rank's buffers are not mapped yet): an all-reduce of `bytes`, or an exchange
  // of `bytes` per range. The same on every rank.
  bool mapsBuffers(Collective collective, size_t bytes, bool preMultiply) const;
  // The chunked schedule a mapped call runs when some rank's buffers are not mapped yet: the chosen one,
  // or the chunked exchange's default grid where packets were chosen.
  Choice mappedFallback(Collective collective, size_t elementBytes, size_t bytes) const;
  // The grid of a zero-copy kernel that moves `bytes` in all.
  LaunchShape directShape(size_t bytes) const;
  // The grid of a mapped zero-copy kernel that moves `bytes` in all and falls back on the chunked kernel
  // of grid `scratch` (it runs that schedule itself): large enough for both.
  LaunchShape mappedShape(size_t bytes, const LaunchShape& scratch) const;
  // The largest grid of a packet kernel (p2p included).
  int maxBlocks() const { return std::min(residentBlocks_, kMaxPacketBlocks); }
  // Chunk channels per pair of ranks: the largest grid of a chunked kernel.
  int chunkBlocks() const { return std::min(residentBlocks_, kMaxChunkBlocks); }
  // Whether every rank holds blocks for a parked kernel beside its grid (MSCCLPP_NCCL_EARLY_LAUNCH is not
  // 0 anywhere; agreed at init, since zero-copy grids take them and must match on every rank).
  void setParkedBlocksHeld(bool held) { parkedBlocksHeld_ = held; }
  // The largest grid of a zero-copy kernel: every block the communicator holds. Such a grid is never
  // launched early, and never lets its successor start early, so it always runs alone and may take the
  // blocks held for a parked kernel too (transport/block_share.h). Calls moving less keep the running
  // grid's share (gridFor).
  int directBlocks() const {
    return std::min(parkedBlocksHeld_ ? BlockShare::held(residentBlocks_) : residentBlocks_,
                    kMaxZeroCopyBlocks);
  }
  // The largest grid launched early (0: none). A kernel launched early parks on SMs while the previous
  // kernel of its stream runs; the blocks the communicator holds cover both (transport/block_share.h).
  int earlyLaunchBlocks() const { return earlyLaunch_ ? BlockShare::earlyBlocks(residentBlocks_) : 0; }

 private:
  LaunchShape shapeFor(const Algorithm& algorithm, const TuningChoice& choice, size_t bytes) const;
  LaunchShape gridFor(const Algorithm& algorithm, const TuningChoice& choice, size_t bytes) const;
  bool usable(const Algorithm& algorithm, Collective collective, size_t bytes, bool registered) const;

  int nranks_ = 1;
  int residentBlocks_ = 1;
  bool earlyLaunch_ = false;
  bool parkedBlocksHeld_ = false;
  bool mapsBuffers_ = false;
  size_t slotPackets_ = 1;
  size_t chunkSlotBytes_ = 0;
  ForcedAlgorithms forced_{};
  TuningTable table_;
  uint64_t fingerprint_ = 0;
};

}  // namespace mscclpp_nccl
