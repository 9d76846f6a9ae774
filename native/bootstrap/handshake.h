// How every bootstrap connection opens, at the root and at a rank's listener alike: the connector
// challenges the acceptor and proves the job's key over a claim (key_proof.h), and the acceptor answers
// the claim with a verdict. The acceptor reads connections from a poll loop, a few bytes at a time, so
// that one silent connection holds nobody up; the connector's half blocks until a deadline.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "native/bootstrap/key_proof.h"
#include "native/bootstrap/socket.h"
#include "native/common/logging.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

// A connection must complete its challenge and response (and, at the root, its hello) within this time.
constexpr double kHandshakeSeconds = 5.0;
// Unauthenticated connections held at once by the root or a rank's listener (each costs a descriptor
// for up to kHandshakeSeconds); when full, the oldest goes. Real ranks connect and authenticate within
// milliseconds, so a flood only evicts its own older connections.
constexpr size_t kMaxPendingConnections = 64;

// Acceptor -> connector after the claim: status 0 (and, from the root, the address table), or a Status
// value and the error text.
struct Reply {
  int32_t status;
  uint32_t bytes;
};

// The acceptor's half of key_proof.h: checks the challenge and sends a fresh nonce with its proof, into a
// socket buffer that has room for it (a new connection's). False: drop the connection.
bool answerChallenge(int fd, const uint8_t* key, KeyPurpose purpose, const Challenge& challenge,
                     uint8_t* nonce);

// The connector's half: challenges the acceptor on `fd`, checks its proof and sends ours with `claim`.
// kRemoteError with the reason when the acceptor did not prove that it holds the key.
Status proveKey(int fd, const uint8_t* key, KeyPurpose purpose, const void* claim, size_t claimBytes,
                Deadline deadline, const std::atomic<bool>* abortFlag);

// The acceptor checks the connector's proof over the claim that follows it in `buf`.
bool claimProven(const uint8_t* key, KeyPurpose purpose, const Challenge& challenge, const uint8_t* nonce,
                 const uint8_t* buf, size_t claimBytes);

// A verdict as it goes on the wire: the Reply, then `payload`.
std::string verdictMessage(Status status, const std::string& payload);
// The connector reads the text of a refusal `verdict` (at most 4 KiB of it); "(message lost)" if it
// does not come.
std::string refusalText(int fd, const Reply& verdict, Deadline deadline,
                        const std::atomic<bool>* abortFlag = nullptr);

// Makes room for one more unauthenticated connection in `conns` (oldest first): when kMaxPendingConnections
// are pending already, the oldest pending one is dropped.
template <typename Conns, typename IsPending>
void makeRoomForPending(Conns& conns, IsPending isPending, const char* who) {
  size_t pending = 0;
  for (const auto& c : conns) pending += isPending(c) ? 1 : 0;
  if (pending < kMaxPendingConnections) return;
  auto oldest = std::find_if(conns.begin(), conns.end(), isPending);
  MSCCLPP_INFO(kBootstrap, "%s: %zu connections are waiting to authenticate: dropping the oldest", who,
               pending);
  conns.erase(oldest);
}

// Accepts the connections pending on `listener` (at most 256 a call) and hands each to `take`.
void acceptPending(const Socket& listener, const std::function<void(Socket)>& take);

// How long an acceptor's poll loop may sleep before `wake`: at most a second.
int pollTimeoutMs(Deadline wake);

// The error of a call of `rank` cut short by its abort.
Status rankAborted(int rank);

}  // namespace mscclpp_nccl
