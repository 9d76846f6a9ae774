// The send/recv schedule, written once for both protocols (PacketTransfers and ChunkTransfers). Block b
// serves parts b, b + gridDim.x, ... in lock step: at each step, first the sends of all its parts, then
// the receives. Part p of a transfer cut into P moves pieces p, p + P, ... of its buffer, `pieceBytes`
// each, one a step, on channel p to its peer. A send of step s waits for the receiver to free the slot
// of step s - 2 (two per channel), which it does in the receive part of its step s - 2, so no wait can
// close a cycle. Included by .cu files only.
#pragma once

#include "native/algorithms/p2p.h"
#include "native/common/arithmetic.h"
#include "native/primitives/peers.h"

namespace mscclpp_nccl {

// Pieces part t moves: those of its transfer from its index on, every t.parts-th. Piece j exists while
// j * pieceBytes < t.bytes, so one division counts them (it sits on every call's path).
__device__ __forceinline__ size_t piecesOfPart(const P2pPart& t, size_t pieceBytes) {
  const size_t skipped = t.part * pieceBytes;
  return t.bytes > skipped ? divCeil(t.bytes - skipped, t.parts * pieceBytes) : 0;
}

// The rounds of every part but those for which skip(l) holds (both ends skip alike: zero-copy parts).
// False when a wait gave up.
template <typename Transfers, typename Skip>
__device__ __forceinline__ bool p2pRounds(Transfers& transfers, const P2pParts& parts, size_t pieceBytes,
                                          Skip skip) {
  int steps = 0;
  for (int l = blockIdx.x; l < parts.count; l += gridDim.x)
    if (!skip(l)) steps = max(steps, static_cast<int>(piecesOfPart(parts.part[l], pieceBytes)));
  // One direction of a step over the block's parts, called with a constant direction so that each
  // compiles to a loop of its own.
  auto pass = [&](int step, bool sending) {
    for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
      const P2pPart& t = parts.part[l];
      const size_t first = (static_cast<size_t>(step) * t.parts + t.part) * pieceBytes;
      if (t.isSend != sending || first >= t.bytes || skip(l)) continue;
      const Piece piece{first, min(pieceBytes, t.bytes - first), t.bytes};
      if (!(sending ? transfers.send(t.peer, t.part, step, t.buffer, piece)
                    : transfers.receive(t.peer, t.part, step, t.buffer, piece)))
        return false;
    }
    return true;
  };
  for (int step = 0; step < steps; ++step)
    if (!pass(step, true) || !pass(step, false)) return false;
  return true;
}

}  // namespace mscclpp_nccl
