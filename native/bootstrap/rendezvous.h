// The rendezvous that starts every bootstrap. A unique id names a root service: its address and the
// job's key. Every rank proves to the root that it holds the key (handshake.h) and says which rank it is
// and where it listens; once all have arrived, the root hands each the table of listening addresses and
// exits. A rank claimed twice, or ranks that disagree on their number, fail the rendezvous on every
// rank; ranks that never come fail it at the deadline, by name. The root serves from a detached thread of
// its own (no CUDA calls), in the process that made the id, or in rank 0's under NCCL_COMM_ID.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "native/bootstrap/key_proof.h"
#include "native/bootstrap/socket.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

// The unique id. Peers share byte order and layout (one cluster, one build of this library). The key is
// the job's: random for an id of ncclGetUniqueId, derived from NCCL_COMM_ID (and the shared secret) else.
struct IdLayout {
  uint32_t magic;
  uint32_t flags;
  uint8_t key[kKeyBytes];
  SocketAddress root;
};
static_assert(sizeof(IdLayout) <= kUniqueIdBytes, "the id must fit ncclUniqueId");
// The id names an NCCL_COMM_ID address: no service runs yet, rank 0 starts it (startRootAtRank0).
constexpr uint32_t kFlagRootAtRank0 = 1;

// The layout of `id`; kInvalidArgument when this library's bootstrapCreateUniqueId did not make it.
Status readUniqueId(const UniqueId& id, IdLayout* out);

// Rank 0 of an NCCL_COMM_ID id: listens at the id's address and serves the rendezvous there.
Status startRootAtRank0(const IdLayout& id, double timeoutSeconds);

// A rank's part: proves the key to the root of `id`, claims `rank` of `nranks` listening at `listen`, and
// fills `table` with every rank's listening address. Gives up after `timeoutSeconds` (plus a grace, so
// that the root's message naming the missing ranks comes first), or when `abortFlag` is raised.
Status joinRendezvous(const IdLayout& id, int rank, int nranks, const SocketAddress& listen,
                      double timeoutSeconds, const std::atomic<bool>* abortFlag,
                      std::vector<SocketAddress>* table);

}  // namespace mscclpp_nccl
