// Out-of-band rendezvous and host-side collectives among the ranks of one communicator, over TCP.
//
// A UniqueId names a root service (address + the job's key). Every rank connects to the root, which
// collects all ranks' listening addresses and hands the table back; afterwards ranks talk to each
// other directly. On every connection both ends prove that they hold the key (key_proof.h); one that
// does not is dropped, and a rank claimed twice fails the communicator on every rank. The rendezvous is
// rendezvous.h, the opening of every connection handshake.h, and the messages between ranks bootstrap.cc.
// No CUDA call is ever made here (helper threads must stay safe during stream capture).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "native/common/status.h"

namespace mscclpp_nccl {

constexpr size_t kUniqueIdBytes = 128;
// The most ranks one communicator may have. Far above any single-host job (and NCCL's own scale), it
// bounds what a rank's hello can make the root allocate (its address table: 28 bytes a rank).
constexpr int kMaxRanks = 1 << 16;
struct UniqueId {
  char bytes[kUniqueIdBytes];
};

// ncclGetUniqueId: picks the address (NCCL_COMM_ID when set, else an interface chosen by
// NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY), draws a random key and starts the root service in
// this process. With NCCL_COMM_ID set no service is started here: rank 0 starts it (see create()).
// `ignoreCommIdEnv` makes a fresh id with its own root service even when NCCL_COMM_ID is set; the
// library uses it for the communicators that ncclCommSplit and ncclCommShrink create.
Status bootstrapCreateUniqueId(UniqueId* out, bool ignoreCommIdEnv = false);

// Seconds a rendezvous may take before it fails naming the missing ranks
// (MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT, default 300).
double bootstrapTimeoutSeconds();

class AbortLink;

// Called on the bootstrap's receiver thread with a peer whose connection ended without its goodbye.
using PeerLostHandler = std::function<void(int peer)>;

class Bootstrap {
 public:
  // Joins the rendezvous named by `id` as `rank` of `nranks`. Blocks until every rank has arrived, or
  // fails with Status::kTimeout (message lists the missing ranks) after `timeoutSeconds`. With a
  // `link`, raising it aborts the new bootstrap (its rendezvous included) until detachAbortLink().
  static Status create(const UniqueId& id, int rank, int nranks, double timeoutSeconds,
                       std::unique_ptr<Bootstrap>* out, AbortLink* link = nullptr);
  // Orderly: peers are told goodbye, so they do not take the closing connections for a death.
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // `data` holds size() slots of `bytesPerRank`; this rank's slot is filled in, the others are
  // filled from the peers.
  virtual Status allGather(void* data, size_t bytesPerRank) = 0;
  virtual Status barrier() = 0;
  // Point-to-point messages, matched by (peer, tag) in order of sending.
  virtual Status send(int peer, int tag, const void* data, size_t bytes) = 0;
  virtual Status recv(int peer, int tag, void* data, size_t bytes) = 0;
  // The next message with `tag` from any peer, whatever its size, waiting at most `seconds`: kTimeout
  // when none came. For a helper thread that serves the peers' requests as they arrive.
  virtual Status recvAny(int tag, double seconds, int* peer, std::vector<char>* message) = 0;
  // Makes the recvAny waiting now, or else the next one, return kTimeout at once (once): a helper thread
  // that serves recvAny learns that it must stop without waiting out its poll.
  virtual void wakeRecvAny() = 0;
  // Makes every blocked and future call return Status::kRemoteError promptly (ncclCommAbort). Peers
  // get no goodbye: they see this rank as lost.
  virtual void abort() = 0;
  virtual bool aborted() const = 0;

  // Collective: opens a connection to and from every peer, then calls `onLost` (once per peer, on the
  // receiver thread; no CUDA there) when a peer's connection ends without the goodbye that orderly
  // teardown sends, i.e. its process died or it aborted. From then on, allGather and barrier fail at
  // once (a ring with a dead rank cannot complete); point-to-point calls among the living still work.
  virtual Status watchPeers(PeerLostHandler onLost) = 0;
  // Ends what create()'s `link` started: raising the link no longer reaches this bootstrap.
  virtual void detachAbortLink() = 0;
};

}  // namespace mscclpp_nccl
