#include "native/bootstrap/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>

namespace mscclpp_nccl {

bool answerChallenge(int fd, const uint8_t* key, KeyPurpose purpose, const Challenge& challenge,
                     uint8_t* nonce) {
  if (challenge.magic != kChallengeMagic || challenge.purpose != static_cast<uint32_t>(purpose)) return false;
  Answer answer;
  if (!ok(randomBytes(answer.nonce, kNonceBytes))) return false;
  acceptorProof(key, purpose, challenge.nonce, answer.nonce, answer.proof);
  memcpy(nonce, answer.nonce, kNonceBytes);
  return ::send(fd, &answer, sizeof(answer), MSG_NOSIGNAL | MSG_DONTWAIT) ==
         static_cast<ssize_t>(sizeof(answer));
}

Status proveKey(int fd, const uint8_t* key, KeyPurpose purpose, const void* claim, size_t claimBytes,
                Deadline deadline, const std::atomic<bool>* abortFlag) {
  Challenge challenge;
  challenge.magic = kChallengeMagic;
  challenge.purpose = static_cast<uint32_t>(purpose);
  MSCCLPP_TRY(randomBytes(challenge.nonce, kNonceBytes));
  MSCCLPP_TRY(sendAll(fd, &challenge, sizeof(challenge), deadline, abortFlag));
  Answer answer;
  MSCCLPP_TRY(recvAll(fd, &answer, sizeof(answer), deadline, abortFlag));
  uint8_t expected[kProofBytes];
  acceptorProof(key, purpose, challenge.nonce, answer.nonce, expected);
  if (!proofsEqual(expected, answer.proof))
    return fail(Status::kRemoteError, "it did not prove that it holds this job's key");
  std::string message(kProofBytes, '\0');
  connectorProof(key, purpose, challenge.nonce, answer.nonce, claim, claimBytes,
                 reinterpret_cast<uint8_t*>(&message[0]));
  message.append(static_cast<const char*>(claim), claimBytes);
  return sendAll(fd, message.data(), message.size(), deadline, abortFlag);
}

bool claimProven(const uint8_t* key, KeyPurpose purpose, const Challenge& challenge, const uint8_t* nonce,
                 const uint8_t* buf, size_t claimBytes) {
  uint8_t expected[kProofBytes];
  connectorProof(key, purpose, challenge.nonce, nonce, buf + kProofBytes, claimBytes, expected);
  return proofsEqual(expected, buf);
}

std::string verdictMessage(Status status, const std::string& payload) {
  const Reply verdict = {static_cast<int32_t>(status), static_cast<uint32_t>(payload.size())};
  std::string message(reinterpret_cast<const char*>(&verdict), sizeof(verdict));
  message += payload;
  return message;
}

std::string refusalText(int fd, const Reply& verdict, Deadline deadline, const std::atomic<bool>* abortFlag) {
  std::string text(std::min<uint32_t>(verdict.bytes, 4096), '\0');
  if (!ok(recvAll(fd, &text[0], text.size(), deadline, abortFlag))) text = "(message lost)";
  return text;
}

void acceptPending(const Socket& listener, const std::function<void(Socket)>& take) {
  for (int i = 0; i < 256; ++i) {
    Socket sock;
    if (!ok(acceptSocket(listener, &sock))) {
      poll(nullptr, 0, 10);  // e.g. out of descriptors: do not spin
      return;
    }
    if (!sock.valid()) return;
    take(std::move(sock));
  }
}

int pollTimeoutMs(Deadline wake) {
  return static_cast<int>(std::min(secondsLeft(wake) * 1000.0 + 1.0, 1000.0));
}

Status rankAborted(int rank) { return fail(Status::kRemoteError, "bootstrap rank %d: aborted", rank); }

}  // namespace mscclpp_nccl
