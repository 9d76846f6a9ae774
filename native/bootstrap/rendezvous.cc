// The rendezvous (rendezvous.h): the unique id, the root service it names, and a rank's request to it.
#include "native/bootstrap/rendezvous.h"

#include <poll.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "native/bootstrap/handshake.h"
#include "native/bootstrap/sha256.h"
#include "native/common/env.h"
#include "native/common/logging.h"
#include "native/common/parameters.h"
#include "native/common/threads.h"

namespace mscclpp_nccl {
namespace {

constexpr uint32_t kIdMagic = 0x3142'4e4d;     // "MNB1"
constexpr uint32_t kHelloMagic = 0x4f4c'4548;  // "HELO"
// Ranks wait longer than the root, so that the root's message naming the missing ranks arrives first.
constexpr double kRootGraceSeconds = 5.0;

// Rank -> root: the claim that follows the rank's proof.
struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t nranks;
  SocketAddress listen;
};

// A warning that shows without NCCL_DEBUG too: it is about who else can join the job.
void warnAlways(const std::string& text) {
  const std::string level = readText(Param::kDebug);
  if (strcasecmp(level.c_str(), "WARN") == 0 || strcasecmp(level.c_str(), "INFO") == 0 ||
      strcasecmp(level.c_str(), "TRACE") == 0)
    logWarn("%s", text.c_str());
  else
    fprintf(stderr, "mscclpp-nccl WARN %s\n", text.c_str());
}

// NCCL_COMM_ID mode: every process must derive the same key without talking. With
// MSCCLPP_NCCL_COMM_SECRET set, the key is an HMAC of NCCL_COMM_ID's text under the SHA-256 of the secret
// text (any text, hex or not, used as is), so that it is bound to this job's address as well; without it,
// the key is SHA-256 of NCCL_COMM_ID's text, which keeps apart unrelated jobs that happen to use the same
// port and protects nothing from anyone who knows NCCL_COMM_ID.
void deriveCommIdKey(const std::string& commId, uint8_t* out) {
  static_assert(kKeyBytes == 32, "the key is one SHA-256 digest");
  const std::string shared = envString("MSCCLPP_NCCL_COMM_SECRET");
  if (!shared.empty()) {
    uint8_t secret[32];
    sha256("mscclpp-nccl comm secret:" + shared, secret);
    return hmacSha256(secret, sizeof(secret), "mscclpp-nccl comm id:" + commId, out);
  }
  sha256("mscclpp-nccl comm id:" + commId, out);
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    warnAlways("bootstrap: NCCL_COMM_ID=" + commId +
               " is used without MSCCLPP_NCCL_COMM_SECRET: any local user (and, off loopback, anyone who can "
               "reach that address) who knows NCCL_COMM_ID can join this job's rendezvous and read or forge "
               "its messages; set MSCCLPP_NCCL_COMM_SECRET to the same secret text for every rank");
}

// Serves one rendezvous, then exits. Runs in its own detached thread; no CUDA calls.
class RootService {
 public:
  RootService(Socket listener, const uint8_t* key, double timeoutSeconds)
      : listener_(std::move(listener)),
        timeout_(timeoutSeconds),
        idleDeadline_(deadlineAfter(timeoutSeconds)) {
    memcpy(key_, key, kKeyBytes);
  }

  void run() {
    while (!done_) {
      std::vector<pollfd> fds;
      std::vector<int> owner;  // -1: listener, 0..: pending index, -2 - r: registered rank r
      fds.push_back({listener_.fd(), POLLIN, 0});
      owner.push_back(-1);
      Deadline wake = Clock::now() + std::chrono::seconds(1);
      for (size_t i = 0; i < pending_.size(); ++i) {
        fds.push_back({pending_[i].sock.fd(), POLLIN, 0});
        owner.push_back(static_cast<int>(i));
        wake = std::min(wake, pending_[i].deadline);
      }
      for (size_t r = 0; r < ranks_.size(); ++r) {
        if (!ranks_[r].valid()) continue;
        fds.push_back({ranks_[r].fd(), POLLIN, 0});
        owner.push_back(-2 - static_cast<int>(r));
      }
      wake = std::min(wake, armed_ ? deadline_ : idleDeadline_);
      if (poll(fds.data(), fds.size(), pollTimeoutMs(wake)) > 0) {
        for (size_t i = 1; i < fds.size() && !done_; ++i) {
          if (!fds[i].revents) continue;
          if (owner[i] >= 0)
            servePending(pending_[owner[i]]);
          else
            watchRank(-2 - owner[i]);
        }
        if (!done_ && fds[0].revents) acceptAll();
      }
      if (done_) break;
      Deadline now = Clock::now();
      for (Pending& p : pending_) {
        if (p.sock.valid() && now >= p.deadline) {
          MSCCLPP_INFO(kBootstrap, "bootstrap root: dropping a connection that did not authenticate in time");
          p.sock.close();
        }
      }
      pending_.erase(
          std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return !p.sock.valid(); }),
          pending_.end());
      if (armed_ && now >= deadline_) {
        if (failed_) break;
        reportTimeout();
      }
      if (!armed_ && now >= idleDeadline_) {
        // An id nobody used (or only strangers knocked): its thread and port must not live forever.
        MSCCLPP_INFO(kBootstrap, "bootstrap root: no rank arrived within %g s; closing the rendezvous",
                     timeout_);
        break;
      }
    }
    MSCCLPP_INFO(kBootstrap, "bootstrap root: service finished");
  }

 private:
  struct Pending {
    Socket sock;
    Deadline deadline;
    bool answered = false;  // our answer went out: the rank's proof and hello come next
    Challenge challenge;
    uint8_t nonce[kNonceBytes];  // ours
    uint8_t buf[kProofBytes + sizeof(Hello)];
    size_t have = 0;
  };

  void acceptAll() {
    acceptPending(listener_, [this](Socket sock) {
      makeRoomForPending(pending_, [](const Pending& p) { return p.sock.valid(); }, "bootstrap root");
      pending_.emplace_back();
      pending_.back().sock = std::move(sock);
      pending_.back().deadline = deadlineAfter(kHandshakeSeconds);
    });
  }

  void servePending(Pending& p) {
    if (!p.sock.valid()) return;
    uint8_t* into = p.answered ? p.buf : reinterpret_cast<uint8_t*>(&p.challenge);
    const size_t want = p.answered ? sizeof(p.buf) : sizeof(p.challenge);
    long n = readSome(p.sock.fd(), into + p.have, want - p.have);
    if (n < 0) {
      p.sock.close();
      return;
    }
    p.have += static_cast<size_t>(n);
    if (p.have < want) return;
    p.have = 0;
    if (!p.answered) {
      p.answered = answerChallenge(p.sock.fd(), key_, KeyPurpose::kRoot, p.challenge, p.nonce);
      if (!p.answered) {
        MSCCLPP_INFO(kBootstrap, "bootstrap root: dropping a connection that sent no valid challenge");
        p.sock.close();
      }
      return;
    }
    if (!claimProven(key_, KeyPurpose::kRoot, p.challenge, p.nonce, p.buf, sizeof(Hello))) {
      MSCCLPP_INFO(kBootstrap, "bootstrap root: dropping a connection that did not prove the key");
      p.sock.close();
      return;
    }
    Hello hello;
    memcpy(&hello, p.buf + kProofBytes, sizeof(hello));
    onHello(std::move(p.sock), hello);
  }

  void onHello(Socket sock, const Hello& hello) {
    if (hello.magic != kHelloMagic || !isValidAddress(hello.listen) || hello.nranks <= 0) return;
    if (failed_) {  // a rank that comes late learns why at once, not at its own timeout
      reply(sock, failStatus_, failText_);
      return;
    }
    if (hello.nranks > kMaxRanks) {  // refused before anything is sized by it
      reply(sock, Status::kInvalidUsage,
            "bootstrap: nranks=" + std::to_string(hello.nranks) + " exceeds the limit of " +
                std::to_string(kMaxRanks) + " ranks");
      return;
    }
    if (hello.rank < 0 || hello.rank >= hello.nranks) {
      reply(sock, Status::kInvalidUsage,
            "bootstrap: rank " + std::to_string(hello.rank) + " is out of range for " +
                std::to_string(hello.nranks) + " ranks");
      return;
    }
    if (nranks_ < 0) {
      // The deadline starts with the first authenticated rank: strangers and port scans do not arm it.
      nranks_ = hello.nranks;
      ranks_.resize(nranks_);
      table_.resize(nranks_);
      armed_ = true;
      deadline_ = deadlineAfter(timeout_);
    }
    if (hello.nranks != nranks_) {
      finishWithError(Status::kInvalidUsage,
                      "bootstrap: rank " + std::to_string(hello.rank) + " joined with nranks=" +
                          std::to_string(hello.nranks) + " but others use nranks=" + std::to_string(nranks_),
                      &sock, /*linger=*/true);
      return;
    }
    if (ranks_[hello.rank].valid()) {
      // Either claim may be the impostor's (one that holds the key): neither is believed.
      finishWithError(Status::kInvalidUsage,
                      "bootstrap: rank " + std::to_string(hello.rank) + " of " + std::to_string(nranks_) +
                          " joined twice (the same unique id used for two ranks, or another process that "
                          "holds the job's key claimed it); the rendezvous fails on every rank",
                      &sock, /*linger=*/true);
      return;
    }
    ranks_[hello.rank] = std::move(sock);
    table_[hello.rank] = hello.listen;
    MSCCLPP_INFO(kBootstrap, "bootstrap root: rank %d/%d arrived (%s)", hello.rank, nranks_,
                 addressToString(hello.listen).c_str());
    if (++arrived_ < nranks_) return;
    std::string table(reinterpret_cast<const char*>(table_.data()), table_.size() * sizeof(SocketAddress));
    for (Socket& rank : ranks_) reply(rank, Status::kSuccess, table);
    done_ = true;
  }

  // A registered rank that disconnects before the table is sent no longer counts as arrived.
  void watchRank(int r) {
    if (!ranks_[r].valid()) return;  // answered and closed by a failure earlier in this round
    char scratch[64];
    if (readSome(ranks_[r].fd(), scratch, sizeof(scratch)) >= 0) return;
    MSCCLPP_INFO(kBootstrap, "bootstrap root: rank %d left before the rendezvous completed", r);
    ranks_[r].close();
    --arrived_;
  }

  void reportTimeout() {
    std::string missing;
    int count = 0;
    for (int r = 0; r < nranks_; ++r) {
      if (ranks_[r].valid()) continue;
      if (++count <= 64) missing += (missing.empty() ? "" : ",") + std::to_string(r);
    }
    if (count > 64) missing += ",...";
    char text[1024];
    snprintf(text, sizeof(text), "bootstrap timed out after %g s: rank%s %s of %d never arrived", timeout_,
             count == 1 ? "" : "s", missing.c_str(), nranks_);
    finishWithError(Status::kTimeout, text, nullptr, /*linger=*/false);
  }

  // Tells every rank that arrived why the rendezvous failed. With `linger`, the service then answers the
  // ranks still to come the same way until its deadline, instead of leaving them to time out.
  void finishWithError(Status status, const std::string& text, Socket* extra, bool linger) {
    logWarn("%s", text.c_str());
    for (Socket& rank : ranks_) {
      if (rank.valid()) reply(rank, status, text);
      rank.close();
    }
    if (extra) reply(*extra, status, text);
    failed_ = true;
    failStatus_ = status;
    failText_ = text;
    done_ = !linger;
  }

  static void reply(const Socket& sock, Status status, const std::string& payload) {
    const std::string message = verdictMessage(status, payload);
    // Best effort: a rank that cannot take its answer in time fails on its own deadline.
    sendAll(sock.fd(), message.data(), message.size(), deadlineAfter(kHandshakeSeconds));
  }

  Socket listener_;
  uint8_t key_[kKeyBytes];
  const double timeout_;
  std::vector<Pending> pending_;
  int nranks_ = -1;
  int arrived_ = 0;
  std::vector<Socket> ranks_;
  std::vector<SocketAddress> table_;
  bool armed_ = false;
  Deadline deadline_;
  const Deadline idleDeadline_;  // before the first rank arrives
  bool done_ = false;
  bool failed_ = false;
  Status failStatus_ = Status::kSuccess;
  std::string failText_;
};

Status startRootService(Socket listener, const uint8_t* key, double timeoutSeconds) {
  try {
    auto service = std::make_unique<RootService>(std::move(listener), key, timeoutSeconds);
    std::thread([service = std::move(service)]() {
      nameThisThread("Rendezvous");
      try {
        service->run();
      } catch (const std::exception& e) {
        logWarn("bootstrap root: service stopped: %s", e.what());
      }
    }).detach();
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return fail(Status::kSystemError, "bootstrap: cannot start the root service: %s", e.what());
  }
}

// A rank's request to the root of one rendezvous (joinRendezvous).
class RootRequest {
 public:
  RootRequest(const IdLayout& id, int rank, int nranks, double timeoutSeconds,
              const std::atomic<bool>* abortFlag)
      : id_(id),
        rank_(rank),
        nranks_(nranks),
        timeout_(timeoutSeconds),
        abortFlag_(abortFlag),
        rootText_(addressToString(id.root)) {}

  Status connect() {
    Status status = connectSocket(id_.root, deadlineAfter(timeout_), abortFlag_, &root_);
    if (ok(status)) return status;
    if (aborted()) return rankAborted(rank_);
    std::string why = lastError();
    return fail(status, "bootstrap: rank %d could not reach the root at %s within %g s: %s", rank_,
                rootText_.c_str(), timeout_, why.c_str());
  }

  // Proves the key with the hello, then waits for the root's answer to it.
  Status hello(const SocketAddress& listen, Reply* reply) {
    Hello hello;
    memset(&hello, 0, sizeof(hello));
    hello.magic = kHelloMagic;
    hello.rank = rank_;
    hello.nranks = nranks_;
    hello.listen = listen;
    // The root answers a challenge at once: a port that stays silent is not our root.
    Status status = proveKey(root_.fd(), id_.key, KeyPurpose::kRoot, &hello, sizeof(hello),
                             deadlineAfter(std::min(timeout_, kHandshakeSeconds)), abortFlag_);
    if (aborted()) return rankAborted(rank_);
    if (status == Status::kRemoteError || status == Status::kTimeout) {
      std::string why = lastError();
      return fail(
          Status::kRemoteError,
          "bootstrap: rank %d: refusing the root at %s: %s (another process on its port, or a unique id "
          "or NCCL_COMM_ID / MSCCLPP_NCCL_COMM_SECRET that differs from the other ranks'?)",
          rank_, rootText_.c_str(), why.c_str());
    }
    if (ok(status))
      status =
          recvAll(root_.fd(), reply, sizeof(*reply), deadlineAfter(timeout_ + kRootGraceSeconds), abortFlag_);
    if (aborted()) return rankAborted(rank_);
    if (status == Status::kTimeout)
      return fail(Status::kTimeout, "bootstrap: rank %d got no answer from the root at %s within %g s", rank_,
                  rootText_.c_str(), timeout_ + kRootGraceSeconds);
    if (ok(status)) return status;
    std::string why = lastError();
    return fail(Status::kRemoteError,
                "bootstrap: rank %d lost the root at %s: %s (root process gone, or the id reused?)", rank_,
                rootText_.c_str(), why.c_str());
  }

  // What follows the root's answer: the address table, or why the rendezvous failed.
  Status readTable(const Reply& reply, std::vector<SocketAddress>* table) {
    const Deadline bodyDeadline = deadlineAfter(kHandshakeSeconds);
    if (reply.status != 0) {
      const std::string text = refusalText(root_.fd(), reply, bodyDeadline);
      bool known = reply.status > 0 && reply.status <= static_cast<int32_t>(Status::kTimeout);
      return fail(known ? static_cast<Status>(reply.status) : Status::kRemoteError, "%s", text.c_str());
    }
    if (reply.bytes != nranks_ * sizeof(SocketAddress))
      return fail(Status::kInternalError, "bootstrap: the root sent %u bytes of addresses, expected %zu",
                  reply.bytes, nranks_ * sizeof(SocketAddress));
    table->resize(nranks_);
    if (ok(recvAll(root_.fd(), table->data(), reply.bytes, bodyDeadline))) return Status::kSuccess;
    std::string why = lastError();
    return fail(Status::kRemoteError, "bootstrap: rank %d: reading the address table: %s", rank_,
                why.c_str());
  }

 private:
  bool aborted() const { return abortFlag_ && abortFlag_->load(); }

  const IdLayout& id_;
  const int rank_;
  const int nranks_;
  const double timeout_;
  const std::atomic<bool>* abortFlag_;
  const std::string rootText_;
  Socket root_;
};

}  // namespace

double bootstrapTimeoutSeconds() {
  double seconds = readSeconds(Param::kBootstrapTimeout);
  return seconds > 0 ? seconds : 300.0;
}

Status bootstrapCreateUniqueId(UniqueId* out, bool ignoreCommIdEnv) {
  if (!out) return fail(Status::kInvalidArgument, "bootstrap: null unique id");
  IdLayout id;
  memset(&id, 0, sizeof(id));
  id.magic = kIdMagic;
  const std::string commId = ignoreCommIdEnv ? std::string() : readText(Param::kCommId);
  if (!commId.empty()) {
    if (!ok(parseAddress(commId, &id.root))) {
      std::string why = lastError();
      return fail(Status::kInvalidArgument, "bootstrap: NCCL_COMM_ID=%s: %s", commId.c_str(), why.c_str());
    }
    id.flags = kFlagRootAtRank0;
    deriveCommIdKey(commId, id.key);
  } else {
    SocketAddress local;
    std::string ifName;
    MSCCLPP_TRY(selectInterfaceAddress(&local, &ifName));
    if (!ok(randomBytes(id.key, kKeyBytes)))
      return fail(Status::kSystemError, "bootstrap: cannot read random bytes for the unique id's key");
    Socket listener;
    MSCCLPP_TRY(listenSocket(local, &listener, &id.root));
    MSCCLPP_TRY(startRootService(std::move(listener), id.key, bootstrapTimeoutSeconds()));
    MSCCLPP_INFO(kBootstrap, "bootstrap: root service listening on %s (%s)", addressToString(id.root).c_str(),
                 ifName.c_str());
  }
  memset(out->bytes, 0, sizeof(out->bytes));
  memcpy(out->bytes, &id, sizeof(id));
  return Status::kSuccess;
}

Status readUniqueId(const UniqueId& id, IdLayout* out) {
  memcpy(out, id.bytes, sizeof(*out));
  if (out->magic != kIdMagic || !isValidAddress(out->root))
    return fail(Status::kInvalidArgument,
                "bootstrap: invalid unique id (not made by this library's ncclGetUniqueId?)");
  return Status::kSuccess;
}

Status startRootAtRank0(const IdLayout& id, double timeoutSeconds) {
  Socket listener;
  SocketAddress bound;
  if (!ok(listenSocket(id.root, &listener, &bound))) {
    std::string why = lastError();
    return fail(Status::kSystemError, "bootstrap: rank 0 cannot serve NCCL_COMM_ID=%s: %s",
                addressToString(id.root).c_str(), why.c_str());
  }
  return startRootService(std::move(listener), id.key, timeoutSeconds);
}

Status joinRendezvous(const IdLayout& id, int rank, int nranks, const SocketAddress& listen,
                      double timeoutSeconds, const std::atomic<bool>* abortFlag,
                      std::vector<SocketAddress>* table) {
  RootRequest request(id, rank, nranks, timeoutSeconds, abortFlag);
  MSCCLPP_TRY(request.connect());
  Reply reply = {0, 0};
  MSCCLPP_TRY(request.hello(listen, &reply));
  return request.readTable(reply, table);
}

}  // namespace mscclpp_nccl
