// The verbs of the chunk protocol, which every chunked algorithm is a schedule of: ChunkBlock (acquire
// and post a chunk slot to send, acquire and release one received, on one block's channel to each peer),
// the unit loops that copy a chunk into or out of a slot and reduce received chunks, forwarding the
// result when asked, and ChunkRounds (the same over a round's pieces of the users' buffers, as the
// packet protocol's PacketRounds offers them). Every thread of a block calls every function here, in
// the same order.
#pragma once

#include <cstdint>

#include "native/device/bounded_wait.cuh"
#include "native/device/posted_words.cuh"
#include "native/device/rank_order.cuh"
#include "native/device/reduce.cuh"
#include "native/device/semaphore.cuh"
#include "native/primitives/chunk_layout.h"
#include "native/primitives/peers.h"

namespace mscclpp_nccl {

// The slot each peer's next chunk uses, resolved once per acquire.
struct ChunkSlots {
  char* send[kMaxChunkRanks];
  const char* recv[kMaxChunkRanks];
};

// One block's view of its chunk channels: channel `channel` (by default the block's index) to every
// peer. `Peers` arguments are predicates on a rank: the channels used by a step. Both ends of a channel
// must use it in the same steps; that keeps its counters in step.
class ChunkBlock {
 public:
  __device__ ChunkBlock(const ChunkComm& comm, ChunkSlots& slots)
      : ChunkBlock(comm, slots, static_cast<int>(blockIdx.x)) {}
  __device__ ChunkBlock(const ChunkComm& comm, ChunkSlots& slots, int channel)
      : comm_(comm), slots_(slots), wait_(comm.wait), channel_(channel) {}

  // Waits until each peer has freed the slot of this rank's next chunk to it; false: give up.
  template <typename Peers>
  __device__ bool acquireSend(Peers peers) {
    bool ok = true;
    for (int peer = threadIdx.x; peer < comm_.nranks; peer += blockDim.x) {
      if (peer == comm_.rank || !peers(peer)) continue;
      const uint64_t next = counter(comm_.sent, peer) + 1;
      slots_.send[peer] = comm_.peerScratch[peer] + chunkSlotOffset(comm_, channel_, comm_.rank, next - 1);
      if (next > kChunkStages && ok)
        ok = semaphoreWait(chunkFreed(comm_, comm_.localScratch, channel_, peer), next - kChunkStages, wait_,
                           peer, scope());
    }
    return __syncthreads_and(ok);
  }

  // Announces the chunks just written to each peer's slot.
  template <typename Peers>
  __device__ void postSend(Peers peers) {
    __syncthreads();
    for (int peer = threadIdx.x; peer < comm_.nranks; peer += blockDim.x) {
      if (peer == comm_.rank || !peers(peer)) continue;
      const uint64_t next = counter(comm_.sent, peer) + 1;
      semaphoreSignal(chunkReady(comm_, comm_.peerScratch[peer], channel_, comm_.rank), next, scope());
      counter(comm_.sent, peer) = next;
    }
  }

  // Waits until each peer's next chunk to this rank has arrived; false: give up.
  template <typename Peers>
  __device__ bool acquireRecv(Peers peers) {
    bool ok = true;
    for (int peer = threadIdx.x; peer < comm_.nranks; peer += blockDim.x) {
      if (peer == comm_.rank || !peers(peer)) continue;
      const uint64_t next = counter(comm_.received, peer) + 1;
      slots_.recv[peer] = comm_.localScratch + chunkSlotOffset(comm_, channel_, peer, next - 1);
      if (ok)
        ok = semaphoreWait(chunkReady(comm_, comm_.localScratch, channel_, peer), next, wait_, peer, scope());
    }
    return __syncthreads_and(ok);
  }

  // Hands the slots just read back to their senders.
  template <typename Peers>
  __device__ void releaseRecv(Peers peers) {
    __syncthreads();
    for (int peer = threadIdx.x; peer < comm_.nranks; peer += blockDim.x) {
      if (peer == comm_.rank || !peers(peer)) continue;
      const uint64_t next = counter(comm_.received, peer) + 1;
      semaphoreSignal(chunkFreed(comm_, comm_.peerScratch[peer], channel_, comm_.rank), next, scope());
      counter(comm_.received, peer) = next;
    }
  }

  // Waits until each peer has consumed every chunk this rank sent it on the channel; false: give up.
  template <typename Peers>
  __device__ bool awaitReleased(Peers peers) {
    bool ok = true;
    for (int peer = threadIdx.x; peer < comm_.nranks; peer += blockDim.x) {
      if (peer == comm_.rank || !peers(peer)) continue;
      if (ok)
        ok = semaphoreWait(chunkFreed(comm_, comm_.localScratch, channel_, peer), counter(comm_.sent, peer),
                           wait_, peer, scope());
    }
    return __syncthreads_and(ok);
  }

  __device__ char* sendSlot(int peer) const { return slots_.send[peer]; }
  __device__ const char* recvSlot(int peer) const { return slots_.recv[peer]; }
  __device__ int rank() const { return comm_.rank; }
  __device__ int nranks() const { return comm_.nranks; }

 private:
  __device__ MemoryScope scope() const { return peerScope(comm_.oneGpu); }
  __device__ uint64_t& counter(uint64_t* counters, int peer) const {
    return counters[static_cast<size_t>(channel_) * comm_.nranks + peer];
  }

  const ChunkComm& comm_;
  ChunkSlots& slots_;
  BoundedWait wait_;
  int channel_;
};

// Calls store(i, load(i)) for units 0..units-1, kUnroll units per thread in flight.
template <int kUnroll, typename Load, typename Store>
__device__ __forceinline__ void forEachUnit(size_t units, Load load, Store store) {
  for (size_t base = threadIdx.x; base < units; base += kUnroll * blockDim.x) {
    Unit unit[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (base + k * blockDim.x < units) unit[k] = load(base + k * blockDim.x);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (base + k * blockDim.x < units) store(base + k * blockDim.x, unit[k]);
  }
}

// One side of a chunk copy: where it is, how many bytes of it are valid and how it may be accessed.
// Slots are 16-byte aligned and always moved in whole units; user buffers sit at any element offset
// and are never touched past their end.
struct ChunkRef {
  char* base;
  size_t bytes;
  int alignment;
};

__device__ __forceinline__ ChunkRef userChunk(const char* base, size_t bytes) {
  return ChunkRef{const_cast<char*>(base), bytes, unitAlignment(base)};
}

__device__ __forceinline__ ChunkRef slotChunk(const char* slot, size_t bytes) {
  return ChunkRef{const_cast<char*>(slot), (bytes + 15) & ~size_t(15), 16};
}

// Copies `bytes` bytes; `scale` multiplies every element by `scalar` on the way (PreMulSum's per-rank
// step). Eight units per thread in flight: a 64 KiB chunk is one pass of a 512-thread block.
template <typename T>
__device__ __forceinline__ void copyChunk(ChunkRef dst, ChunkRef src, size_t bytes, bool scale,
                                          typename ElementTraits<T>::Acc scalar) {
  if (bytes == 0 || dst.base == src.base) return;
  forEachUnit<8>((bytes + 15) / 16,
                 [&](size_t i) {
                   Unit unit = loadUnit<T>(src.base, i, src.bytes, src.alignment);
                   if (scale) unit = Unit{Word<T>::scale(unit.lo, scalar), Word<T>::scale(unit.hi, scalar)};
                   return unit;
                 },
                 [&](size_t i, Unit unit) { storeUnit<T>(dst.base, i, dst.bytes, dst.alignment, unit); });
}

// Reduces unit i of every rank's contribution, load(rank, i), in rank order and hands the result to
// store(i, unit), for units 0..units-1. Each pass takes kUnroll units per thread and issues the loads of
// kGroup ranks together before adding any, so kUnroll * kGroup loads are in flight: a rank at a time
// would wait out one memory latency per rank in every pass.
template <typename T, typename Op, int kUnroll, int kGroup, typename Load, typename Store>
__device__ __forceinline__ void reduceUnits(size_t units, int nranks, int postDivisor, Load load,
                                            Store store) {
  for (size_t base = threadIdx.x; base < units; base += kUnroll * blockDim.x) {
    UnitReduction<T, Op> reduction[kUnroll];
    for (int first = 0; first < nranks; first += kGroup) {
      Unit unit[kGroup][kUnroll];
#pragma unroll
      for (int g = 0; g < kGroup; ++g)
#pragma unroll
        for (int k = 0; k < kUnroll; ++k)
          unit[g][k] = first + g < nranks && base + k * blockDim.x < units
                           ? load(first + g, base + k * blockDim.x)
                           : Unit{};
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        if (first + g >= nranks) break;
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          if (first + g == 0)
            reduction[k].first(unit[g][k]);
          else
            reduction[k].add(unit[g][k]);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (base + k * blockDim.x < units) store(base + k * blockDim.x, reduction[k].result(postDivisor));
  }
}

// Reduces `bytes` bytes of every rank's contribution in rank order: this rank's from `own` (scaled
// when `scale`), every peer's from its received slot. Writes the result to `out` and, when
// `forward`, into this rank's send slot of every peer.
template <typename T, typename Op>
__device__ __forceinline__ void reduceChunk(const ChunkBlock& channels, const char* own, char* out,
                                            size_t bytes, bool scale, typename ElementTraits<T>::Acc scalar,
                                            int postDivisor, bool forward) {
  if (bytes == 0) return;
  const ChunkRef mine = userChunk(own, bytes), result = userChunk(out, bytes);
  const size_t slotBytes = slotChunk(nullptr, bytes).bytes;
  const int me = channels.rank(), nranks = channels.nranks();
  reduceUnits<T, Op, 4, 1>(
      (bytes + 15) / 16, nranks, postDivisor,
      [&](int sender, size_t i) {
        if (sender != me) return loadUnit<T>(channels.recvSlot(sender), i, slotBytes, 16);
        Unit unit = loadUnit<T>(mine.base, i, mine.bytes, mine.alignment);
        return scale ? Unit{Word<T>::scale(unit.lo, scalar), Word<T>::scale(unit.hi, scalar)} : unit;
      },
      [&](size_t i, Unit unit) {
        storeUnit<T>(result.base, i, result.bytes, result.alignment, unit);
        if (!forward) return;
        for (int k = 1; k < nranks; ++k)
          storeUnit<T>(channels.sendSlot(peerAfter(me, k, nranks)), i, slotBytes, 16, unit);
      });
}

// One block's chunk verbs over the rounds of a schedule, on a piece of the users' buffers (peers.h:
// Piece). A channel carries its own flow control, so a verb touches only the channels of the peers it
// names, and a round without data ends the schedule (the same on every rank, so channels stay in step).
// Contributions are scaled by `scale` as they are sent or reduced. Verbs return false when a wait gave
// up.
template <typename T>
class ChunkRounds {
 public:
  __device__ ChunkRounds(ChunkBlock& channels, PreMultiply<T> scale) : channels_(channels), scale_(scale) {}

  // Whether the round has anything to move.
  __device__ bool begin(int, const Piece& piece) const { return piece.bytes > 0; }

  // The piece of one buffer into every `to` peer's slot.
  template <typename To>
  __device__ __forceinline__ bool sendPiece(To to, const char* buffer, const Piece& piece) {
    return sendPieces(to, [&](int) { return buffer; }, piece);
  }

  // The piece of buffer(peer) into every `to` peer's slot.
  template <typename To, typename BufferOf>
  __device__ __forceinline__ bool sendPieces(To to, BufferOf buffer, const Piece& piece) {
    return fillSlots(to, [&](int peer) { return Span{buffer(peer) + piece.first, piece.bytes}; });
  }

  // Each `from` peer's piece into buffer(peer), and this rank's own piece from `own` into `ownOut`
  // where `own` is set.
  template <typename From, typename BufferOf>
  __device__ __forceinline__ bool receivePieces(From from, BufferOf buffer, const char* own, char* ownOut,
                                                const Piece& piece) {
    if (own != nullptr)
      copyChunk<T>(userChunk(ownOut + piece.first, piece.bytes), userChunk(own + piece.first, piece.bytes),
                   piece.bytes, false, scale_.factor);
    return drainSlots(from, [&](int peer) { return Span{buffer(peer) + piece.first, piece.bytes}; });
  }

  // Scatter: the piece of `buffer` at pieceOf(peer) into each peer's slot (an empty piece too: every
  // channel moves a chunk a round).
  template <bool kTokens, typename PieceOf>
  __device__ __forceinline__ bool sendEach(const char* buffer, PieceOf pieceOf) {
    return fillSlots(AllPeers{}, [&](int peer) {
      const Piece piece = pieceOf(peer);
      return Span{buffer + piece.first, piece.bytes};
    });
  }

  // Every rank's piece reduced in rank order (the scatter's chunks, this rank's own from `own`), stored
  // into `out` and written into every peer's next slot in the same pass.
  template <typename Op, typename To>
  __device__ __forceinline__ bool reduceForward(const char* own, char* out, const Piece& piece, To, bool,
                                                int postDivisor) {
    static_assert(kAllPeers<To>, "the chunked two-shot forwards every reduced chunk to every peer");
    if (!channels_.acquireRecv(AllPeers{}) || !channels_.acquireSend(AllPeers{})) return false;
    reduceChunk<T, Op>(channels_, own + piece.first, out + piece.first, piece.bytes, scale_.on, scale_.factor,
                       postDivisor, true);
    channels_.releaseRecv(AllPeers{});
    channels_.postSend(AllPeers{});
    return true;
  }

  // Gather: each `from` peer's reduced piece into `buffer` at pieceOf(peer).
  template <bool kTokens, typename From, typename PieceOf>
  __device__ __forceinline__ bool receiveEach(From from, char* buffer, PieceOf pieceOf, size_t) {
    return drainSlots(from, [&](int peer) {
      const Piece piece = pieceOf(peer);
      return Span{buffer + piece.first, piece.bytes};
    });
  }

  // Every rank's contribution reduced in rank order into `out`: this rank's from `own`, each peer's
  // received.
  template <typename Op>
  __device__ __forceinline__ bool receiveReduce(const char* own, char* out, const Piece& piece,
                                                int postDivisor) {
    if (!channels_.acquireRecv(AllPeers{})) return false;
    reduceChunk<T, Op>(channels_, own + piece.first, out + piece.first, piece.bytes, scale_.on, scale_.factor,
                       postDivisor, false);
    channels_.releaseRecv(AllPeers{});
    return true;
  }

 private:
  // Where one peer's chunk comes from or goes to in the users' buffers.
  struct Span {
    const char* at;
    size_t bytes;
  };

  // Copies span(peer) into every `to` peer's next slot (scaled), then posts the slots.
  template <typename To, typename SpanOf>
  __device__ __forceinline__ bool fillSlots(To to, SpanOf span) {
    if (!channels_.acquireSend(to)) return false;
    const int me = channels_.rank(), nranks = channels_.nranks();
    for (int k = 1; k < nranks; ++k) {
      const int peer = peerAfter(me, k, nranks);
      if (!to(peer)) continue;
      const Span from = span(peer);
      copyChunk<T>(slotChunk(channels_.sendSlot(peer), from.bytes), userChunk(from.at, from.bytes),
                   from.bytes, scale_.on, scale_.factor);
    }
    channels_.postSend(to);
    return true;
  }

  // Copies every `from` peer's received slot into span(peer), then hands the slots back.
  template <typename From, typename SpanOf>
  __device__ __forceinline__ bool drainSlots(From from, SpanOf span) {
    if (!channels_.acquireRecv(from)) return false;
    const int me = channels_.rank(), nranks = channels_.nranks();
    for (int k = 1; k < nranks; ++k) {
      const int peer = peerBefore(me, k, nranks);
      if (!from(peer)) continue;
      const Span to = span(peer);
      copyChunk<T>(userChunk(to.at, to.bytes), slotChunk(channels_.recvSlot(peer), to.bytes), to.bytes, false,
                   scale_.factor);
    }
    channels_.releaseRecv(from);
    return true;
  }

  ChunkBlock& channels_;
  PreMultiply<T> scale_;
};

// One block's point-to-point verbs on chunk channels: a piece of a transfer's buffer sent or received on
// channel (peer, channel), as PacketTransfers offers them on packet channels (a chunk channel counts its
// own steps). Verbs return false when a wait gave up.
template <typename T>
class ChunkTransfers {
 public:
  __device__ ChunkTransfers(const ChunkComm& comm, ChunkSlots& slots) : comm_(comm), slots_(slots) {}

  __device__ __forceinline__ bool send(int peer, int channel, int, const char* buffer, const Piece& piece) {
    ChunkBlock block(comm_, slots_, channel);
    const OneRank to{peer};
    if (!block.acquireSend(to)) return false;
    copyChunk<T>(slotChunk(block.sendSlot(peer), piece.bytes), userChunk(buffer + piece.first, piece.bytes),
                 piece.bytes, false, 1);
    block.postSend(to);
    return true;
  }

  __device__ __forceinline__ bool receive(int peer, int channel, int, char* buffer, const Piece& piece) {
    ChunkBlock block(comm_, slots_, channel);
    const OneRank from{peer};
    if (!block.acquireRecv(from)) return false;
    copyChunk<T>(userChunk(buffer + piece.first, piece.bytes), slotChunk(block.recvSlot(peer), piece.bytes),
                 piece.bytes, false, 1);
    block.releaseRecv(from);
    return true;
  }

  // Descriptor verbs: a small plain struct (a whole number of 64-bit words) travels as one step's chunk, and
  // its slot stays taken until the receiver hands it back, which the sender can wait for. Zero-copy
  // send/recv (algorithms/p2p.h) sends the sender's buffer so, and the receiver pulls before it closes.
  // Sender: posts `descriptor` on channel (peer, channel); false: gave up.
  template <typename Descriptor>
  __device__ bool sendDescriptor(int peer, int channel, const Descriptor& descriptor) {
    ChunkBlock block(comm_, slots_, channel);
    const OneRank to{peer};
    if (!block.acquireSend(to)) return false;
    if (threadIdx.x == 0) *reinterpret_cast<Descriptor*>(block.sendSlot(peer)) = descriptor;
    block.postSend(to);
    return true;
  }

  // Receiver: the descriptor on channel (peer, channel), into *descriptor on every thread; its slot stays
  // taken until closeDescriptor. False: gave up.
  template <typename Descriptor>
  __device__ bool receiveDescriptor(int peer, int channel, Descriptor* descriptor) {
    ChunkBlock block(comm_, slots_, channel);
    if (!block.acquireRecv(OneRank{peer})) return false;
    *descriptor = loadPosted<Descriptor>(block.recvSlot(peer));
    return true;
  }

  // Receiver: hands the descriptor's slot back, once the whole block is done with what it described.
  __device__ void closeDescriptor(int peer, int channel) {
    ChunkBlock block(comm_, slots_, channel);
    block.releaseRecv(OneRank{peer});
  }

  // Sender: waits until the receiver has closed every descriptor sent on the channel; false: gave up.
  __device__ bool awaitDescriptorClosed(int peer, int channel) {
    ChunkBlock block(comm_, slots_, channel);
    return block.awaitReleased(OneRank{peer});
  }

 private:
  const ChunkComm& comm_;
  ChunkSlots& slots_;
};

}  // namespace mscclpp_nccl
