// TCP bootstrap between ranks: once the rendezvous (rendezvous.h) has handed every rank the table of
// listening addresses, ranks exchange framed messages {tag, size, payload} directly. Every connection opens
// with the handshake of handshake.h, so that both ends know the other holds the job's key. Each bootstrap
// runs one receiver thread that reads all incoming connections into a mailbox keyed by (peer, tag); outgoing
// connections are opened lazily, one per peer, and only ever written to (so closing one never discards unread
// data). After watchPeers() every pair has a connection each way; an orderly close sends a goodbye frame
// first, so a connection that ends without one means the peer died (or aborted).
#include "native/bootstrap/bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "native/bootstrap/abort_link.h"
#include "native/bootstrap/handshake.h"
#include "native/bootstrap/key_proof.h"
#include "native/bootstrap/rendezvous.h"
#include "native/bootstrap/socket.h"
#include "native/common/logging.h"
#include "native/common/threads.h"

namespace mscclpp_nccl {
namespace {

// Internal tags sit at the bottom of the int range; user tags there are refused.
constexpr int kTagAllGather = INT_MIN;
constexpr int kTagHello = INT_MIN + 1;    // watchPeers: opens the connection each way
constexpr int kTagGoodbye = INT_MIN + 2;  // orderly close: the end of the connection that follows is no death
constexpr int kTagFailure = INT_MIN + 3;  // the sender failed the communicator: its text says why
constexpr int kReservedTagMax = INT_MIN + 15;
// The largest frame a peer may announce. Frames carry one rank's slot of an all-gather (descriptors of
// well under 1 KiB) or a point-to-point message of the library (ids, a few hundred bytes); 64 MiB is
// room for a whole kMaxRanks-table of 1 KiB descriptors, while a lying header costs at most this much.
constexpr uint64_t kMaxFrameBytes = 64ull << 20;
// The most that frames may hold in this process (every bootstrap's, queued for their owners or being read)
// before the owners take them: past it, a connection is read no further (TCP then holds its sender back)
// unless its peer holds under kPeerFloorBytes here, so that a peer that fills the cap, or one party that
// claimed several ranks, cannot stall the small messages of the others. The library's own traffic stays
// far below; peers that hold the key cannot grow this process past the cap and a floor per connection.
constexpr uint64_t kMaxQueuedBytes = 4 * kMaxFrameBytes;
constexpr uint64_t kPeerFloorBytes = 4 << 20;  // far above the library's own messages
std::atomic<uint64_t> processQueuedBytes{0};
// A receiver with a connection paused by the process-wide cap looks again this often: frames taken by the
// owner of another bootstrap free room without waking it.
constexpr int kPausedPollMs = 50;
constexpr size_t kNotifierThreads = 8;  // peers told of a failure at once
// The longest failure text taken from a peer.
constexpr size_t kMaxFailureText = 1024;
// Payload buffers start at this size and double as bytes arrive, up to the announced size.
constexpr size_t kFirstChunkBytes = 64 << 10;
constexpr size_t kCoalesceBytes = 4096;  // small frames go out in one write
// A goodbye is not worth a longer wait (a peer that cannot take 16 bytes is gone or stuck).
constexpr double kGoodbyeSeconds = 1.0;

// Rank -> rank: the claim that follows the connecting rank's proof, once per connection.
struct PeerClaim {
  int32_t rank;
};
struct FrameHeader {
  int32_t tag;
  uint32_t reserved;
  uint64_t bytes;
};

class TcpBootstrap;

// The bootstraps alive in this process. At exit they say goodbye: many scripts exit without destroying
// their communicators, and peers must not take that for a death. In a forked child their outgoing
// sockets are closed: the child's copies would keep a dead parent's connections open, hiding its death.
class LiveBootstraps {
 public:
  static LiveBootstraps& get();
  void add(TcpBootstrap* bootstrap);
  void remove(TcpBootstrap* bootstrap);

 private:
  LiveBootstraps() = default;
  static void atExit();
  static void beforeFork();
  static void afterForkInParent();
  static void afterForkInChild();

  std::mutex mu_;
  std::vector<TcpBootstrap*> live_;
};

class TcpBootstrap final : public Bootstrap {
 public:
  TcpBootstrap(int rank, int nranks, double timeoutSeconds, const uint8_t* key)
      : rank_(rank),
        nranks_(nranks),
        timeout_(timeoutSeconds),
        peerClaimed_(nranks, 0),
        peerClosed_(nranks, 0),
        peerLost_(nranks, 0),
        queuedBytes_(nranks, 0) {
    memcpy(key_, key, kKeyBytes);
    for (int i = 0; i < nranks; ++i) out_.push_back(std::make_unique<Outgoing>());
    LiveBootstraps::get().add(this);
  }

  ~TcpBootstrap() override {
    LiveBootstraps::get().remove(this);  // waits for an exit-time goodbye in progress
    detachAbortLink();
    // The peers learn why this communicator failed before its goodbye (bounded by the notifier's deadline).
    if (notifier_.joinable()) notifier_.join();
    // No call may be in flight now, so outgoing sockets are closed gracefully (not shut down): data
    // already written, the goodbye last, still reaches the peers.
    sayGoodbye();
    stop();
    if (receiver_.joinable()) receiver_.join();
    uint64_t held = 0;  // frames nobody took, and frames left half read
    for (uint64_t bytes : queuedBytes_) held += bytes;
    processQueuedBytes -= held;
  }

  Status init(const IdLayout& id);

  int rank() const override { return rank_; }
  int size() const override { return nranks_; }

  Status allGather(void* data, size_t bytesPerRank) override;
  Status barrier() override;
  Status send(int peer, int tag, const void* data, size_t bytes) override;
  Status recv(int peer, int tag, void* data, size_t bytes) override;
  Status recvAny(int tag, double seconds, int* peer, std::vector<char>* message) override;
  void wakeRecvAny() override;
  void abort() override;
  bool aborted() const override { return aborted_.load(); }
  Status watchPeers(PeerLostHandler onLost) override;
  void detachAbortLink() override;
  void attachAbortLink(AbortLink* link);

  // Tells every peer with a connection from here that this rank leaves in order (not after abort()).
  void sayGoodbye();
  // In a forked child: points the outgoing descriptors at /dev/null (async-signal-safe calls only).
  void dropOutgoingInForkedChild(int devNull);

 private:
  struct Outgoing {
    std::timed_mutex mu;  // one frame at a time per peer; timed for the goodbye at exit
    Socket sock;
    std::atomic<int> liveFd{-1};  // read by abort() without the mutex
    bool broken = false;          // a failed write may have left half a frame: never reuse
    bool saidGoodbye = false;
  };
  struct Incoming {
    Socket sock;
    int peer = -1;  // -1 until the handshake is complete
    Deadline handshakeDeadline;
    bool answered = false;  // our answer went out: the peer's proof and claim come next
    Challenge challenge;
    uint8_t nonce[kNonceBytes];                     // ours
    uint8_t head[kProofBytes + sizeof(PeerClaim)];  // proof and claim, then each frame header
    size_t have = 0;
    bool inPayload = false;
    FrameHeader header;
    std::vector<char> payload;
    bool saidGoodbye = false;
  };

  Status checkArgs(const char* op, int peer, int tag, const void* data, size_t bytes) const;
  Status sendFrame(int peer, int tag, const void* data, size_t bytes, Deadline deadline);
  Status recvFrame(int peer, int tag, void* data, size_t bytes);
  Status connectPeer(Outgoing& out, int peer, int tag, Deadline deadline);
  // Queues a frame for the owner; its bytes were charged to the peer as they were read.
  void deliver(int peer, int tag, std::vector<char> payload);
  // Takes the oldest message from `peer` with `tag` (mailMu_ held); false when there is none.
  bool takeMail(int peer, int tag, std::vector<char>* message);
  // Counts bytes held for `peer` here, in its total and the process's (mailMu_ held).
  void chargeLocked(int peer, int64_t bytes);
  void charge(int peer, int64_t bytes);
  // Whether a connection from `peer` may be read into more memory (mailMu_ held, or not for mayGrow).
  bool mayGrowLocked(int peer) const;
  bool mayGrow(int peer);
  // The communicator is failed for good (a rank claimed twice, or a peer said so): every call fails with
  // `text`. With `notifyPeers`, a helper thread tells every peer. Receiver thread.
  void failCommunicator(const std::string& text, int peer, bool notifyPeers);
  bool recordFailure(const std::string& text);  // false when it had failed already
  Status failedError(const std::string& text) const { return fail(Status::kRemoteError, "%s", text.c_str()); }
  // A send that failed because the peer closed its connection may be the echo of a failure announced
  // elsewhere (a rank claimed twice: the rank that saw it tells every peer, and some close at once). Waits
  // briefly for that notice so that the error names the cause, not the closed connection.
  Status causeOf(Status status);
  const std::atomic<bool>* stopFlagFor(int tag) const { return tag == kTagFailure ? &aborted_ : &sendsStop_; }
  // The error of a send that stopped: the abort or the failure that stopped it, else `status` as it is.
  Status whySendStopped(int tag, Status status);
  void startNotifier(const std::string& text);
  int sendVerdict(int fd, Status status, const std::string& text);
  void wakeReceiver();
  void markPeerClosed(int peer);
  void connectionEnded(const Incoming& in);
  Status lostPeerError(const char* op) const;
  void receiverMain();
  void receiverLoop();
  bool serveIncoming(Incoming& in);
  // One step of the handshake of a connection to our listener: 1 progress, 0 nothing to read now, -1 close.
  int serveHandshake(Incoming& in);
  void stop();
  Status abortedError() const { return rankAborted(rank_); }

  const int rank_;
  const int nranks_;
  const double timeout_;
  uint8_t key_[kKeyBytes];
  std::vector<SocketAddress> peers_;
  Socket listener_;
  SocketAddress listenAddr_;
  Socket wakeRead_, wakeWrite_;  // a pipe that interrupts the receiver's poll
  std::thread receiver_;
  std::atomic<bool> aborted_{false};
  // Aborted, or failed for good: sends stop waiting (for a peer to listen, or for room in its socket),
  // except the ones that tell the peers of the failure, which only an abort stops.
  std::atomic<bool> sendsStop_{false};
  // Peers that opened their one connection to this rank (receiver thread only): a peer connects once per
  // bootstrap, so a second claim of the same rank is an impostor or a replay, and is dropped.
  std::vector<char> peerClaimed_;

  std::mutex mailMu_;
  std::condition_variable mailCv_;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mailbox_;  // (peer, tag) -> FIFO
  std::vector<char> peerClosed_;       // peer's connection ended: nothing more will arrive from it
  std::vector<char> peerLost_;         // ... and without a goodbye
  std::vector<uint64_t> queuedBytes_;  // payload bytes read from each peer (queued or in a frame being read)
  std::string failure_;                // set once: the communicator failed for good
  bool recvAnyWoken_ = false;          // wakeRecvAny() was called and no recvAny has returned for it yet
  bool ready_ = false;                 // init() has the peers' addresses: a failure can be told to them
  bool notifying_ = false;             // notifier_ was started (once)
  std::thread notifier_;
  int firstLost_ = -1;
  PeerLostHandler onLost_;
  bool receiverFailed_ = false;
  AbortLink* link_ = nullptr;  // touched by the owner only (create, detachAbortLink, destructor)

  std::vector<std::unique_ptr<Outgoing>> out_;
  std::mutex collMu_;  // collectives of one object do not interleave
};

Status TcpBootstrap::init(const IdLayout& id) {
  if ((id.flags & kFlagRootAtRank0) && rank_ == 0) MSCCLPP_TRY(startRootAtRank0(id, timeout_));

  // Ranks of a loopback root are all on this host; otherwise listen where NCCL_SOCKET_IFNAME points.
  SocketAddress local;
  std::string ifName = "lo";
  if (isLoopback(id.root))
    local = loopbackAddress(id.root.sa.sa_family);
  else
    MSCCLPP_TRY(selectInterfaceAddress(&local, &ifName));
  MSCCLPP_TRY(listenSocket(local, &listener_, &listenAddr_));
  int pipeFds[2];
  if (pipe2(pipeFds, O_NONBLOCK | O_CLOEXEC) != 0)
    return fail(Status::kSystemError, "bootstrap: pipe: %s", strerror(errno));
  wakeRead_ = Socket(pipeFds[0]);
  wakeWrite_ = Socket(pipeFds[1]);
  receiver_ = std::thread([this] {
    nameThisThread("Bootstrap");
    receiverMain();
  });

  MSCCLPP_TRY(joinRendezvous(id, rank_, nranks_, listenAddr_, timeout_, &aborted_, &peers_));
  std::string failure;
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mailMu_);
    ready_ = true;
    failure = failure_;
    notify = !failure.empty() && !notifying_;
    notifying_ = notifying_ || notify;
  }
  if (!failure.empty()) {  // a rank was claimed twice before the peers were known: tell them now
    if (notify) startNotifier(failure);
    return failedError(failure);
  }
  MSCCLPP_INFO(kBootstrap, "bootstrap: rank %d/%d ready, listening on %s (%s)", rank_, nranks_,
               addressToString(listenAddr_).c_str(), ifName.c_str());
  return Status::kSuccess;
}

Status TcpBootstrap::checkArgs(const char* op, int peer, int tag, const void* data, size_t bytes) const {
  if (peer < 0 || peer >= nranks_)
    return fail(Status::kInvalidArgument, "bootstrap %s: peer %d out of range [0, %d)", op, peer, nranks_);
  if (tag <= kReservedTagMax)
    return fail(Status::kInvalidArgument, "bootstrap %s: tag %d is reserved for internal use", op, tag);
  if (!data && bytes > 0) return fail(Status::kInvalidArgument, "bootstrap %s: null buffer", op);
  return Status::kSuccess;
}

Status TcpBootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  MSCCLPP_TRY(checkArgs("send", peer, tag, data, bytes));
  return causeOf(sendFrame(peer, tag, data, bytes, deadlineAfter(timeout_)));
}

Status TcpBootstrap::causeOf(Status status) {
  if (ok(status)) return status;
  std::unique_lock<std::mutex> lock(mailMu_);
  if (!failure_.empty()) return failedError(failure_);
  if (status == Status::kTimeout) return status;
  constexpr auto kNoticeWait = std::chrono::seconds(2);
  mailCv_.wait_for(lock, kNoticeWait,
                   [&] { return !failure_.empty() || firstLost_ >= 0 || aborted_.load(); });
  return failure_.empty() ? status : failedError(failure_);
}

Status TcpBootstrap::recv(int peer, int tag, void* data, size_t bytes) {
  MSCCLPP_TRY(checkArgs("recv", peer, tag, data, bytes));
  return recvFrame(peer, tag, data, bytes);
}

Status TcpBootstrap::recvAny(int tag, double seconds, int* peer, std::vector<char>* message) {
  if (tag <= kReservedTagMax)
    return fail(Status::kInvalidArgument, "bootstrap recvAny: tag %d is reserved for internal use", tag);
  const Deadline deadline = deadlineAfter(seconds);
  std::unique_lock<std::mutex> lock(mailMu_);
  for (;;) {
    if (aborted_.load()) return abortedError();
    if (!failure_.empty()) return failedError(failure_);
    for (int from = 0; from < nranks_; ++from) {
      if (!takeMail(from, tag, message)) continue;
      *peer = from;
      return Status::kSuccess;
    }
    if (receiverFailed_)
      return fail(Status::kSystemError, "bootstrap: rank %d: the receiver thread failed", rank_);
    if (std::exchange(recvAnyWoken_, false) || Clock::now() >= deadline) return Status::kTimeout;
    mailCv_.wait_until(lock, deadline);
  }
}

void TcpBootstrap::wakeRecvAny() {
  {
    std::lock_guard<std::mutex> lock(mailMu_);
    recvAnyWoken_ = true;
  }
  mailCv_.notify_all();
}

Status TcpBootstrap::allGather(void* data, size_t bytesPerRank) {
  if (!data && bytesPerRank > 0) return fail(Status::kInvalidArgument, "bootstrap allGather: null buffer");
  std::lock_guard<std::mutex> lock(collMu_);
  {
    std::lock_guard<std::mutex> mail(mailMu_);
    if (!failure_.empty()) return failedError(failure_);
    if (firstLost_ >= 0) return lostPeerError("allGather");
  }
  // Ring: at step s, pass on the slot that arrived at step s-1 (own slot first). Only two connections
  // per rank, and the receiver thread drains eagerly, so sends never wait for the matching recv.
  char* base = static_cast<char*>(data);
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  for (int step = 0; step < nranks_ - 1; ++step) {
    const int sendSlot = (rank_ - step + nranks_) % nranks_;
    const int recvSlot = (rank_ - step - 1 + 2 * nranks_) % nranks_;
    MSCCLPP_TRY(causeOf(sendFrame(next, kTagAllGather, base + sendSlot * bytesPerRank, bytesPerRank,
                                  deadlineAfter(timeout_))));
    MSCCLPP_TRY(recvFrame(prev, kTagAllGather, base + recvSlot * bytesPerRank, bytesPerRank));
  }
  return Status::kSuccess;
}

Status TcpBootstrap::barrier() {
  try {
    std::vector<char> bytes(nranks_, 0);
    return allGather(bytes.data(), 1);
  } catch (const std::exception& e) {
    return fail(Status::kSystemError, "bootstrap barrier: %s", e.what());
  }
}

Status TcpBootstrap::whySendStopped(int tag, Status status) {
  if (aborted_.load()) return abortedError();
  if (tag != kTagFailure && sendsStop_.load()) {
    std::lock_guard<std::mutex> lock(mailMu_);
    return failedError(failure_);
  }
  return status;
}

Status TcpBootstrap::connectPeer(Outgoing& out, int peer, int tag, Deadline deadline) {
  const std::atomic<bool>* stop = stopFlagFor(tag);
  Socket sock;
  Status status = connectSocket(peers_[peer], deadline, stop, &sock);
  if (!ok(status)) {
    if (stop->load()) return whySendStopped(tag, status);
    std::string why = lastError();
    return fail(status, "bootstrap: rank %d cannot connect to rank %d at %s: %s", rank_, peer,
                addressToString(peers_[peer]).c_str(), why.c_str());
  }
  out.sock = std::move(sock);
  out.liveFd.store(out.sock.fd());
  if (aborted_.load()) return abortedError();  // abort() may have missed the new descriptor
  const PeerClaim claim = {rank_};
  const Deadline handshake = std::min(deadline, deadlineAfter(kHandshakeSeconds));
  status = proveKey(out.sock.fd(), key_, KeyPurpose::kPeer, &claim, sizeof(claim), handshake, stop);
  Reply verdict = {0, 0};
  if (ok(status)) status = recvAll(out.sock.fd(), &verdict, sizeof(verdict), handshake, stop);
  if (ok(status) && verdict.status != 0) {
    const std::string text = refusalText(out.sock.fd(), verdict, handshake, stop);
    status = fail(Status::kRemoteError, "it refused this rank: %s", text.c_str());
    // It failed the communicator: so does this rank, and it tells its own peers too, so that the news
    // reaches every rank even where the first rank to know stopped before telling them all.
    if (verdict.status == static_cast<int32_t>(Status::kRemoteError)) failCommunicator(text, peer, true);
  }
  if (ok(status)) return status;
  out.broken = true;
  if (stop->load()) return whySendStopped(tag, status);
  std::string why = lastError();
  return fail(Status::kRemoteError, "bootstrap: rank %d: connecting to rank %d at %s: %s", rank_, peer,
              addressToString(peers_[peer]).c_str(), why.c_str());
}

Status TcpBootstrap::sendFrame(int peer, int tag, const void* data, size_t bytes, Deadline deadline) {
  if (aborted_.load()) return abortedError();
  if (tag != kTagFailure) {
    std::lock_guard<std::mutex> lock(mailMu_);
    if (!failure_.empty()) return failedError(failure_);
  }
  if (peer == rank_) {
    try {
      const char* p = static_cast<const char*>(data);
      std::vector<char> payload(p, p + bytes);
      charge(peer, static_cast<int64_t>(bytes));
      deliver(peer, tag, std::move(payload));
      return Status::kSuccess;
    } catch (const std::exception& e) {
      return fail(Status::kSystemError, "bootstrap: send to self: %s", e.what());
    }
  }
  if (bytes > kMaxFrameBytes)  // the peer would drop the connection (see serveIncoming)
    return fail(Status::kInvalidArgument,
                "bootstrap: rank %d: a %zu-byte message to rank %d exceeds the limit of %llu", rank_, bytes,
                peer, static_cast<unsigned long long>(kMaxFrameBytes));
  Outgoing& out = *out_[peer];
  std::unique_lock<std::timed_mutex> lock(out.mu, deadline);
  if (!lock.owns_lock())
    return fail(Status::kTimeout, "bootstrap: rank %d: the connection to rank %d stayed busy", rank_, peer);
  if (out.broken)
    return fail(Status::kRemoteError, "bootstrap: rank %d: the connection to rank %d failed earlier", rank_,
                peer);
  if (!out.sock.valid()) MSCCLPP_TRY(connectPeer(out, peer, tag, deadline));
  const std::atomic<bool>* stop = stopFlagFor(tag);

  const FrameHeader header = {tag, 0, bytes};
  Status status;
  if (bytes <= kCoalesceBytes) {
    char frame[sizeof(FrameHeader) + kCoalesceBytes];
    memcpy(frame, &header, sizeof(header));
    if (bytes) memcpy(frame + sizeof(header), data, bytes);
    status = sendAll(out.sock.fd(), frame, sizeof(header) + bytes, deadline, stop);
  } else {
    status = sendAll(out.sock.fd(), &header, sizeof(header), deadline, stop);
    if (ok(status)) status = sendAll(out.sock.fd(), data, bytes, deadline, stop);
  }
  if (ok(status)) return status;
  out.broken = true;
  if (stop->load()) return whySendStopped(tag, status);
  std::string why = lastError();
  return fail(status, "bootstrap: rank %d: sending %zu bytes (tag %d) to rank %d failed: %s", rank_, bytes,
              tag, peer, why.c_str());
}

Status TcpBootstrap::recvFrame(int peer, int tag, void* data, size_t bytes) {
  const Deadline deadline = deadlineAfter(timeout_);
  std::vector<char> message;
  enum { kGot, kAborted, kFailed, kClosed, kLost, kBroken, kTimedOut } outcome;
  std::string failure;
  {
    std::unique_lock<std::mutex> lock(mailMu_);
    for (;;) {
      if (aborted_.load()) {
        outcome = kAborted;
        break;
      }
      if (!failure_.empty()) {
        outcome = kFailed;
        failure = failure_;
        break;
      }
      if (takeMail(peer, tag, &message)) {
        outcome = kGot;
        break;
      }
      if (peerClosed_[peer]) {
        outcome = kClosed;
        break;
      }
      if (tag == kTagAllGather && firstLost_ >= 0) {  // the ring is cut: this slot will never come
        outcome = kLost;
        break;
      }
      if (receiverFailed_) {
        outcome = kBroken;
        break;
      }
      if (Clock::now() >= deadline) {
        outcome = kTimedOut;
        break;
      }
      mailCv_.wait_until(lock, deadline);
    }
  }
  switch (outcome) {
    case kAborted:
      return abortedError();
    case kFailed:
      return failedError(failure);
    case kClosed:
      return fail(Status::kRemoteError, "bootstrap: rank %d: rank %d closed its connection (tag %d pending)",
                  rank_, peer, tag);
    case kLost:
      return lostPeerError("allGather");
    case kBroken:
      return fail(Status::kSystemError, "bootstrap: rank %d: the receiver thread failed", rank_);
    case kTimedOut:
      return fail(Status::kTimeout, "bootstrap: rank %d: no message from rank %d (tag %d) within %g s", rank_,
                  peer, tag, timeout_);
    case kGot:
      break;
  }
  if (message.size() != bytes)
    return fail(Status::kInternalError,
                "bootstrap: rank %d: message from rank %d (tag %d) has %zu bytes, expected %zu", rank_, peer,
                tag, message.size(), bytes);
  if (bytes) memcpy(data, message.data(), bytes);
  return Status::kSuccess;
}

void TcpBootstrap::deliver(int peer, int tag, std::vector<char> payload) {
  {
    std::lock_guard<std::mutex> lock(mailMu_);
    mailbox_[{peer, tag}].push_back(std::move(payload));
  }
  mailCv_.notify_all();
}

bool TcpBootstrap::takeMail(int peer, int tag, std::vector<char>* message) {
  auto it = mailbox_.find({peer, tag});
  if (it == mailbox_.end() || it->second.empty()) return false;
  *message = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) mailbox_.erase(it);
  const bool wasPaused = !mayGrowLocked(peer);
  chargeLocked(peer, -static_cast<int64_t>(message->size()));
  if (wasPaused && mayGrowLocked(peer)) wakeReceiver();  // read that peer again
  return true;
}

void TcpBootstrap::chargeLocked(int peer, int64_t bytes) {
  queuedBytes_[peer] += static_cast<uint64_t>(bytes);
  processQueuedBytes += static_cast<uint64_t>(bytes);
}

void TcpBootstrap::charge(int peer, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mailMu_);
  chargeLocked(peer, bytes);
}

bool TcpBootstrap::mayGrowLocked(int peer) const {
  return queuedBytes_[peer] < kPeerFloorBytes || processQueuedBytes.load() < kMaxQueuedBytes;
}

bool TcpBootstrap::mayGrow(int peer) {
  std::lock_guard<std::mutex> lock(mailMu_);
  return mayGrowLocked(peer);
}

bool TcpBootstrap::recordFailure(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(mailMu_);
    if (!failure_.empty()) return false;
    failure_ = text;
  }
  sendsStop_.store(true);
  mailCv_.notify_all();
  return true;
}

void TcpBootstrap::failCommunicator(const std::string& text, int peer, bool notifyPeers) {
  if (!recordFailure(text)) return;
  logWarn("%s", text.c_str());
  PeerLostHandler handler;
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mailMu_);
    handler = onLost_;
    notify = notifyPeers && ready_ && !notifying_;  // not ready: init() tells them, once it knows the peers
    notifying_ = notifying_ || notify;
  }
  if (notify) startNotifier(text);
  if (handler) handler(peer);  // stops the communicator's kernels
}

// A thread of its own: telling a peer may need a new connection, whose handshake needs that peer's
// receiver, which may be telling us the same at that moment. Several peers are told at once, so that a
// peer that is gone (its listener refuses until the deadline) delays no other; the destructor waits for
// this thread, so one deadline bounds it all.
void TcpBootstrap::startNotifier(const std::string& text) {
  try {
    notifier_ = std::thread([this, text] {
      nameThisThread("Notifier");
      std::vector<int> order;  // peers with a connection open first: they are told fastest
      for (bool connected : {true, false})
        for (int peer = 0; peer < nranks_; ++peer)
          if (peer != rank_ && (out_[peer]->liveFd.load() >= 0) == connected) order.push_back(peer);
      const Deadline deadline = deadlineAfter(kHandshakeSeconds);
      std::atomic<size_t> next{0};
      auto tellSome = [&] {
        for (size_t i = next++; i < order.size(); i = next++)
          sendFrame(order[i], kTagFailure, text.data(), text.size(), deadline);
      };
      std::vector<std::thread> helpers;
      try {
        while (helpers.size() + 1 < std::min<size_t>(kNotifierThreads, order.size()))
          helpers.emplace_back(tellSome);
      } catch (const std::exception&) {  // fewer helpers: the notice still goes out, more slowly
      }
      tellSome();
      for (auto& helper : helpers) helper.join();
    });
  } catch (const std::exception& e) {
    logWarn("bootstrap: rank %d: cannot tell the peers why the communicator failed: %s", rank_, e.what());
  }
}

int TcpBootstrap::sendVerdict(int fd, Status status, const std::string& text) {
  const std::string message = verdictMessage(status, text);
  // A new connection's socket buffer has room for it.
  const ssize_t sent = ::send(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return sent == static_cast<ssize_t>(message.size()) ? 1 : -1;
}

// Interrupts the receiver's poll (it then looks at every connection again).
void TcpBootstrap::wakeReceiver() {
  if (!wakeWrite_.valid()) return;
  char byte = 1;
  ssize_t ignored = write(wakeWrite_.fd(), &byte, 1);
  (void)ignored;  // a full pipe already wakes the receiver
}

void TcpBootstrap::markPeerClosed(int peer) {
  {
    std::lock_guard<std::mutex> lock(mailMu_);
    peerClosed_[peer] = 1;
  }
  mailCv_.notify_all();
}

void TcpBootstrap::connectionEnded(const Incoming& in) {
  if (in.saidGoodbye || aborted_.load()) {  // an orderly close, or our own teardown
    markPeerClosed(in.peer);
    return;
  }
  PeerLostHandler handler;
  {
    std::lock_guard<std::mutex> lock(mailMu_);
    peerClosed_[in.peer] = 1;
    peerLost_[in.peer] = 1;
    if (firstLost_ < 0) firstLost_ = in.peer;
    handler = onLost_;
  }
  mailCv_.notify_all();
  MSCCLPP_INFO(kBootstrap, "bootstrap: rank %d: rank %d is gone (its connection ended without a goodbye)",
               rank_, in.peer);
  if (handler) handler(in.peer);
}

Status TcpBootstrap::lostPeerError(const char* op) const {
  return fail(Status::kRemoteError,
              "bootstrap %s: rank %d: rank %d is gone (its process exited or crashed without finalizing, or "
              "it aborted), so the collective cannot complete",
              op, rank_, firstLost_);
}

Status TcpBootstrap::watchPeers(PeerLostHandler onLost) {
  try {
    {
      std::lock_guard<std::mutex> lock(mailMu_);
      onLost_ = std::move(onLost);
    }
    // A connection each way for every pair: every rank then holds one that ends when a peer does.
    for (int peer = 0; peer < nranks_; ++peer)
      if (peer != rank_) MSCCLPP_TRY(sendFrame(peer, kTagHello, nullptr, 0, deadlineAfter(timeout_)));
    for (int peer = 0; peer < nranks_; ++peer)
      if (peer != rank_) MSCCLPP_TRY(recvFrame(peer, kTagHello, nullptr, 0));
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return fail(Status::kSystemError, "bootstrap: rank %d: watching peers: %s", rank_, e.what());
  }
}

void TcpBootstrap::attachAbortLink(AbortLink* link) {
  link_ = link;
  if (link_) link_->attach(this);
}

void TcpBootstrap::detachAbortLink() {
  if (link_) link_->detach(this);
  link_ = nullptr;
}

void TcpBootstrap::sayGoodbye() {
  if (aborted_.load()) return;  // an aborted rank is to be seen as lost
  const FrameHeader header = {kTagGoodbye, 0, 0};
  for (const auto& outPtr : out_) {
    Outgoing& out = *outPtr;
    // Another thread may hold the connection in a long send (at exit): do not wait for it.
    std::unique_lock<std::timed_mutex> lock(out.mu, std::chrono::duration<double>(kGoodbyeSeconds));
    if (!lock.owns_lock() || out.broken || out.saidGoodbye || !out.sock.valid()) continue;
    out.saidGoodbye = true;
    // Plain send calls, not sendAll: a failure here is no error to report (the peer may be gone).
    const char* p = reinterpret_cast<const char*>(&header);
    size_t left = sizeof(header);
    const Deadline deadline = deadlineAfter(kGoodbyeSeconds);
    while (left > 0 && Clock::now() < deadline) {
      ssize_t n = ::send(out.sock.fd(), p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        p += n;
        left -= static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        break;
      } else {
        pollfd pfd = {out.sock.fd(), POLLOUT, 0};
        poll(&pfd, 1, 10);
      }
    }
    if (left > 0) out.broken = true;
  }
}

void TcpBootstrap::dropOutgoingInForkedChild(int devNull) {
  for (const auto& out : out_) {
    int fd = out->liveFd.load();
    if (fd >= 0) dup2(devNull, fd);  // the number stays taken, so nothing else reuses it
  }
}

LiveBootstraps& LiveBootstraps::get() {
  // Never destroyed: the exit and fork handlers may run after static destructors.
  static LiveBootstraps* registry = [] {
    auto* r = new LiveBootstraps();
    atexit(&LiveBootstraps::atExit);
    pthread_atfork(&LiveBootstraps::beforeFork, &LiveBootstraps::afterForkInParent,
                   &LiveBootstraps::afterForkInChild);
    return r;
  }();
  return *registry;
}

void LiveBootstraps::add(TcpBootstrap* bootstrap) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.push_back(bootstrap);
}

void LiveBootstraps::remove(TcpBootstrap* bootstrap) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(std::remove(live_.begin(), live_.end(), bootstrap), live_.end());
}

void LiveBootstraps::atExit() {
  LiveBootstraps& self = get();
  std::lock_guard<std::mutex> lock(self.mu_);  // keeps each alive while it says goodbye
  for (TcpBootstrap* bootstrap : self.live_) bootstrap->sayGoodbye();
  self.live_.clear();
}

// The registry's lock is held across fork() so that the child finds it in a consistent state.
void LiveBootstraps::beforeFork() { get().mu_.lock(); }

void LiveBootstraps::afterForkInParent() { get().mu_.unlock(); }

void LiveBootstraps::afterForkInChild() {
  LiveBootstraps& self = get();
  int devNull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devNull >= 0) {
    for (TcpBootstrap* bootstrap : self.live_) bootstrap->dropOutgoingInForkedChild(devNull);
    close(devNull);
  }
  self.live_.clear();  // the child's copies are not its own: no goodbye from it at exit
  self.mu_.unlock();
}

void TcpBootstrap::receiverMain() {
  try {
    receiverLoop();
  } catch (const std::exception& e) {
    logWarn("bootstrap: rank %d: receiver thread failed: %s", rank_, e.what());
    {
      std::lock_guard<std::mutex> lock(mailMu_);
      receiverFailed_ = true;
    }
    mailCv_.notify_all();
  }
  // Peers that still try to connect get refused rather than left waiting.
  listener_.shutdown();
}

void TcpBootstrap::receiverLoop() {
  std::vector<std::unique_ptr<Incoming>> conns;
  while (!aborted_.load()) {
    std::vector<pollfd> fds;
    fds.push_back({wakeRead_.fd(), POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    Deadline wake = Clock::now() + std::chrono::seconds(1);
    for (const auto& in : conns) {
      // A connection past the cap is not read until frames are taken (hang-ups still show).
      const bool paused = in->peer >= 0 && !mayGrow(in->peer);
      fds.push_back({in->sock.fd(), static_cast<short>(paused ? 0 : POLLIN), 0});
      if (in->peer < 0) wake = std::min(wake, in->handshakeDeadline);
      if (paused) wake = std::min(wake, Clock::now() + std::chrono::milliseconds(kPausedPollMs));
    }
    if (poll(fds.data(), fds.size(), pollTimeoutMs(wake)) < 0 && errno != EINTR)
      throw std::runtime_error(std::string("poll: ") + strerror(errno));
    if (aborted_.load()) break;
    if (fds[0].revents) {
      char drain[64];
      while (read(wakeRead_.fd(), drain, sizeof(drain)) > 0) {
      }
    }
    const Deadline now = Clock::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      Incoming& in = *conns[i];
      bool keep = fds[i + 2].revents ? serveIncoming(in) : true;
      if (keep && in.peer < 0 && now >= in.handshakeDeadline) {
        MSCCLPP_INFO(kBootstrap, "bootstrap: rank %d: dropping a connection that did not authenticate",
                     rank_);
        keep = false;
      }
      if (!keep) {
        in.sock.close();
        if (in.peer >= 0) charge(in.peer, -static_cast<int64_t>(in.payload.size()));  // a frame half read
        in.payload = std::vector<char>();
      }
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& in) { return !in->sock.valid(); }),
                conns.end());
    if (fds[1].revents) {
      acceptPending(listener_, [&conns](Socket sock) {
        makeRoomForPending(
            conns, [](const std::unique_ptr<Incoming>& c) { return c->peer < 0; }, "bootstrap: listener");
        auto in = std::make_unique<Incoming>();
        in->sock = std::move(sock);
        in->handshakeDeadline = deadlineAfter(kHandshakeSeconds);
        conns.push_back(std::move(in));
      });
    }
  }
}

int TcpBootstrap::serveHandshake(Incoming& in) {
  uint8_t* into = in.answered ? in.head : reinterpret_cast<uint8_t*>(&in.challenge);
  const size_t want = in.answered ? sizeof(in.head) : sizeof(in.challenge);
  long n = readSome(in.sock.fd(), into + in.have, want - in.have);
  if (n <= 0) return n == 0 ? 0 : -1;
  in.have += static_cast<size_t>(n);
  if (in.have < want) return 1;
  in.have = 0;
  if (!in.answered) {
    in.answered = answerChallenge(in.sock.fd(), key_, KeyPurpose::kPeer, in.challenge, in.nonce);
    if (in.answered) return 1;
    MSCCLPP_INFO(kBootstrap, "bootstrap: rank %d: dropping a connection that sent no valid challenge", rank_);
    return -1;
  }
  if (!claimProven(key_, KeyPurpose::kPeer, in.challenge, in.nonce, in.head, sizeof(PeerClaim))) {
    MSCCLPP_INFO(kBootstrap, "bootstrap: rank %d: dropping a connection that did not prove the key", rank_);
    return -1;
  }
  PeerClaim claim;
  memcpy(&claim, in.head + kProofBytes, sizeof(claim));
  if (claim.rank < 0 || claim.rank >= nranks_ || claim.rank == rank_) return -1;
  if (peerClaimed_[claim.rank]) {
    // A rank connects once per bootstrap, so one of the two holds the key without being that rank (or the
    // same id serves two jobs). Which one cannot be told: neither is believed, and the communicator fails.
    const std::string text = "bootstrap: rank " + std::to_string(rank_) + ": rank " +
                             std::to_string(claim.rank) +
                             " was claimed by two connections (another process that holds the job's key, or "
                             "one unique id used by two jobs); the communicator fails on every rank";
    sendVerdict(in.sock.fd(), Status::kRemoteError, text);
    failCommunicator(text, claim.rank, /*notifyPeers=*/true);
    return -1;  // refused before it is tied to the rank: its end is no loss
  }
  if (sendVerdict(in.sock.fd(), Status::kSuccess, "") < 0) return -1;
  peerClaimed_[claim.rank] = 1;
  in.peer = claim.rank;
  return 1;
}

// Reads what is available on one connection; false when the connection is to be closed.
bool TcpBootstrap::serveIncoming(Incoming& in) {
  for (;;) {
    if (in.peer < 0) {
      const int progress = serveHandshake(in);
      if (progress <= 0) return progress == 0;
      continue;
    }
    if (!in.inPayload) {
      long n = readSome(in.sock.fd(), in.head + in.have, sizeof(FrameHeader) - in.have);
      if (n == 0) return true;
      if (n < 0) break;
      in.have += static_cast<size_t>(n);
      if (in.have < sizeof(FrameHeader)) continue;
      memcpy(&in.header, in.head, sizeof(in.header));
      in.have = 0;
      if (in.header.bytes > kMaxFrameBytes) {
        logWarn(
            "bootstrap: rank %d: rank %d announced a frame of %llu bytes, over the limit of %llu; dropping "
            "its connection",
            rank_, in.peer, static_cast<unsigned long long>(in.header.bytes),
            static_cast<unsigned long long>(kMaxFrameBytes));
        break;
      }
      in.payload = std::vector<char>();
      in.inPayload = true;
    }
    if (in.have < in.header.bytes) {
      // Grown as bytes arrive, never to what the header merely claims, and within the process's cap.
      if (in.have == in.payload.size()) {
        if (!mayGrow(in.peer)) return true;  // paused until frames are taken (see receiverLoop)
        const size_t before = in.payload.size();
        in.payload.resize(
            std::min<uint64_t>(in.header.bytes, std::max<size_t>(kFirstChunkBytes, 2 * in.have)));
        charge(in.peer, static_cast<int64_t>(in.payload.size() - before));
      }
      long n = readSome(in.sock.fd(), in.payload.data() + in.have, in.payload.size() - in.have);
      if (n == 0) return true;
      if (n < 0) break;
      in.have += static_cast<size_t>(n);
      if (in.have < in.header.bytes) continue;
    }
    if (in.header.tag == kTagGoodbye || in.header.tag == kTagFailure) {  // for us, not for the owner
      charge(in.peer, -static_cast<int64_t>(in.payload.size()));
      in.saidGoodbye = in.saidGoodbye || in.header.tag == kTagGoodbye;
      if (in.header.tag == kTagFailure)
        failCommunicator("bootstrap: rank " + std::to_string(rank_) + ": rank " + std::to_string(in.peer) +
                             " failed the communicator: " +
                             std::string(in.payload.data(), std::min(in.payload.size(), kMaxFailureText)),
                         in.peer, /*notifyPeers=*/false);
    } else {
      deliver(in.peer, in.header.tag, std::move(in.payload));
    }
    in.payload = std::vector<char>();
    in.inPayload = false;
    in.have = 0;
  }
  connectionEnded(in);  // the peer left, died or broke the protocol: nothing more will come
  return false;
}

void TcpBootstrap::stop() {
  aborted_.store(true);
  sendsStop_.store(true);
  wakeReceiver();
  {
    std::lock_guard<std::mutex> lock(mailMu_);
  }  // a waiter between its check and its wait sees the flag
  mailCv_.notify_all();
}

void TcpBootstrap::abort() {
  MSCCLPP_INFO(kBootstrap, "bootstrap: rank %d: abort", rank_);
  stop();
  // Unblock senders stuck in a full socket buffer and tell peers at once.
  for (const auto& out : out_) {
    int fd = out->liveFd.load();
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
}

}  // namespace

Status Bootstrap::create(const UniqueId& id, int rank, int nranks, double timeoutSeconds,
                         std::unique_ptr<Bootstrap>* out, AbortLink* link) {
  if (!out) return fail(Status::kInvalidArgument, "bootstrap: null output");
  out->reset();
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(Status::kInvalidArgument, "bootstrap: rank %d of %d is out of range", rank, nranks);
  if (nranks > kMaxRanks)
    return fail(Status::kInvalidArgument, "bootstrap: %d ranks exceed the limit of %d", nranks, kMaxRanks);
  IdLayout layout;
  MSCCLPP_TRY(readUniqueId(id, &layout));
  if (!(timeoutSeconds > 0)) timeoutSeconds = bootstrapTimeoutSeconds();
  try {
    auto bootstrap = std::make_unique<TcpBootstrap>(rank, nranks, timeoutSeconds, layout.key);
    bootstrap->attachAbortLink(link);
    MSCCLPP_TRY(bootstrap->init(layout));
    *out = std::move(bootstrap);
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return fail(Status::kSystemError, "bootstrap: rank %d: %s", rank, e.what());
  }
}

}  // namespace mscclpp_nccl
