// Lanes: flow-controlled channels of plain chunks between two ranks, the bandwidth protocol.
//
// Packets spend half of every store on flags; large messages instead move in chunks of plain 16-byte
// stores, each announced by a semaphore. Block b of rank s sends to block b of rank r through lane
// (b, s -> r): `kLaneStages` chunk slots in r's lane scratch, a "ready" counter in r's memory (chunks
// s has written) and a "freed" counter in s's memory (chunks r has consumed). The sender writes slot
// (n mod stages) of chunk n once freed >= n + 1 - stages, the receiver reads it once ready >= n + 1.
// Each rank counts the chunks of every lane it sends and receives in its own device memory, so
// lanes stay in step across kernels, grids of different sizes and CUDA-graph replays.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "native/device/device_types.h"
#include "native/device/grid_limits.h"

namespace mscclpp_nccl {

constexpr int kLaneStages = 2;
constexpr int kLaneThreads = 512;
constexpr size_t kLaneAlignment = 16;
// Largest communicator the lanes serve (kernels keep a slot table per peer in shared memory).
constexpr int kMaxLaneRanks = 64;

struct LaneComm {
  int rank;
  int nranks;
  int blocks;                // lanes per ordered pair of ranks: the largest grid of a chunked kernel
  char* localScratch;        // this rank's lane scratch
  char* const* peerScratch;  // device array: every rank's lane scratch as mapped here (own entry too)
  size_t slotBytes;          // bytes of one chunk slot: the largest chunk
  uint64_t* sent;            // [block][peer]: chunks this rank has posted on lane (block, me -> peer)
  uint64_t* received;        // [block][peer]: chunks this rank has consumed from lane (block, peer -> me)
  WaitControl wait;
};

// How a chunked schedule splits its bytes: `blocks` lanes, each moving `chunkBytes` per peer range in a
// round, for `rounds` rounds. A kernel with more blocks than `blocks` (a mapped zero-copy kernel that runs
// the chunked schedule when its ranks agree on scratch) leaves the rest out of it.
struct LaneSchedule {
  size_t chunkBytes;
  int rounds;
  int blocks;
};

// Scratch layout: data[block][sender][stage][slotBytes], ready[block][sender], freed[block][receiver].
__host__ __device__ inline size_t laneDataBytes(int blocks, int nranks, size_t slotBytes) {
  return static_cast<size_t>(blocks) * nranks * kLaneStages * slotBytes;
}

__host__ __device__ inline size_t laneScratchBytes(int blocks, int nranks, size_t slotBytes) {
  return laneDataBytes(blocks, nranks, slotBytes) + 2ull * blocks * nranks * sizeof(uint64_t);
}

__host__ __device__ inline size_t laneSlotOffset(const LaneComm& lanes, int block, int sender,
                                                 uint64_t chunk) {
  return ((static_cast<size_t>(block) * lanes.nranks + sender) * kLaneStages + chunk % kLaneStages) *
         lanes.slotBytes;
}

// The ready counter of lane (block, sender -> owner of `scratch`).
__host__ __device__ inline uint64_t* laneReady(const LaneComm& lanes, char* scratch, int block, int sender) {
  return reinterpret_cast<uint64_t*>(scratch + laneDataBytes(lanes.blocks, lanes.nranks, lanes.slotBytes)) +
         static_cast<size_t>(block) * lanes.nranks + sender;
}

// The freed counter of lane (block, owner of `scratch` -> receiver).
__host__ __device__ inline uint64_t* laneFreed(const LaneComm& lanes, char* scratch, int block,
                                               int receiver) {
  return laneReady(lanes, scratch, block, receiver) + static_cast<size_t>(lanes.blocks) * lanes.nranks;
}

// Counters a communicator keeps in its own memory for lanes: sent and received, per block and peer.
inline size_t laneCounterWords(int blocks, int nranks) { return 2ull * blocks * nranks; }

}  // namespace mscclpp_nccl
