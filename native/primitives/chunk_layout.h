// The chunk protocol: flow-controlled channels of plain chunks between two ranks, for bandwidth.
//
// Packets spend half of every store on flags; large messages instead move in chunks of plain 16-byte
// stores, each announced by a semaphore. Block b of rank s sends to block b of rank r through channel
// (b, s -> r): `kChunkStages` chunk slots in r's chunk scratch, a "ready" counter in r's memory (chunks
// s has written) and a "freed" counter in s's memory (chunks r has consumed). The sender writes slot
// (n mod stages) of chunk n once freed >= n + 1 - stages, the receiver reads it once ready >= n + 1.
// Each rank counts the chunks of every channel it sends and receives in its own device memory, so
// channels stay in step across kernels, grids of different sizes and CUDA-graph replays.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "native/device/device_types.h"
#include "native/device/grid_limits.h"

namespace mscclpp_nccl {

constexpr int kChunkStages = 2;
constexpr int kChunkThreads = 512;
constexpr size_t kChunkAlignment = 16;
// Largest communicator the chunk channels serve (kernels keep a slot table per peer in shared memory).
constexpr int kMaxChunkRanks = 64;

struct ChunkComm {
  int rank;
  int nranks;
  int blocks;                // channels per ordered pair of ranks: the largest grid of a chunked kernel
  char* localScratch;        // this rank's chunk scratch
  char* const* peerScratch;  // device array: every rank's chunk scratch as mapped here (own entry too)
  size_t slotBytes;          // bytes of one chunk slot: the largest chunk
  uint64_t* sent;            // [block][peer]: chunks this rank has posted on channel (block, me -> peer)
  uint64_t* received;        // [block][peer]: chunks this rank has consumed from channel (block, peer -> me)
  WaitControl wait;
  bool oneGpu;  // every rank runs on this GPU: the semaphores order stores at device scope
};

// How a chunked schedule splits its bytes: `blocks` channels, each moving `chunkBytes` per peer range in a
// round, for `rounds` rounds. A kernel with more blocks than `blocks` (a mapped zero-copy kernel that runs
// the chunked schedule when its ranks agree on scratch) leaves the rest out of it.
struct ChunkSchedule {
  size_t chunkBytes;
  int rounds;
  int blocks;
};

// Scratch layout: data[block][sender][stage][slotBytes], ready[block][sender], freed[block][receiver].
__host__ __device__ inline size_t chunkDataBytes(int blocks, int nranks, size_t slotBytes) {
  return static_cast<size_t>(blocks) * nranks * kChunkStages * slotBytes;
}

__host__ __device__ inline size_t chunkScratchBytes(int blocks, int nranks, size_t slotBytes) {
  return chunkDataBytes(blocks, nranks, slotBytes) + 2ull * blocks * nranks * sizeof(uint64_t);
}

__host__ __device__ inline size_t chunkSlotOffset(const ChunkComm& comm, int block, int sender,
                                                  uint64_t chunk) {
  return ((static_cast<size_t>(block) * comm.nranks + sender) * kChunkStages + chunk % kChunkStages) *
         comm.slotBytes;
}

// The ready counter of channel (block, sender -> owner of `scratch`).
__host__ __device__ inline uint64_t* chunkReady(const ChunkComm& comm, char* scratch, int block, int sender) {
  return reinterpret_cast<uint64_t*>(scratch + chunkDataBytes(comm.blocks, comm.nranks, comm.slotBytes)) +
         static_cast<size_t>(block) * comm.nranks + sender;
}

// The freed counter of channel (block, owner of `scratch` -> receiver).
__host__ __device__ inline uint64_t* chunkFreed(const ChunkComm& comm, char* scratch, int block,
                                                int receiver) {
  return chunkReady(comm, scratch, block, receiver) + static_cast<size_t>(comm.blocks) * comm.nranks;
}

// Counters a communicator keeps in its own memory for chunk channels: sent and received, per block and peer.
inline size_t chunkCounterWords(int blocks, int nranks) { return 2ull * blocks * nranks; }

}  // namespace mscclpp_nccl
