// Challenge and response on every bootstrap connection (rank to root, rank to rank): each side proves
// that it holds the job key over two fresh nonces, and the key itself never crosses the wire. A recorded
// exchange is worthless later (the other side's nonce is new each time), and a process that squats the
// root's port, or a rank's, cannot answer a challenge.
//
//   connector -> acceptor  Challenge {magic, purpose, nonceC}
//   acceptor -> connector  Answer {nonceA, HMAC(key, "acceptor" | purpose | nonceC | nonceA)}
//   connector -> acceptor  HMAC(key, "connector" | purpose | nonceC | nonceA | claim), then the claim
//
// The claim (a rank's hello to the root, or its rank number to a peer) is covered by the connector's proof,
// so it is bound to this connection. Distinct labels keep one side's proof from being reflected as the
// other's; the purpose keeps an answer of a rank's listener from passing for the root's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "native/bootstrap/hmac.h"

namespace mscclpp_nccl {

constexpr size_t kKeyBytes = 32;
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr uint32_t kChallengeMagic = 0x3143'4e4d;  // "MNC1"
enum class KeyPurpose : uint32_t { kRoot = 1, kPeer = 2 };

struct Challenge {
  uint32_t magic;
  uint32_t purpose;
  uint8_t nonce[kNonceBytes];
};
struct Answer {
  uint8_t nonce[kNonceBytes];
  uint8_t proof[kProofBytes];
};

inline std::string proofMessage(const char* label, KeyPurpose purpose, const uint8_t* connectorNonce,
                                const uint8_t* acceptorNonce, const void* claim, size_t claimBytes) {
  const uint32_t p = static_cast<uint32_t>(purpose);
  std::string m = std::string("mscclpp-nccl ") + label;
  m.append(reinterpret_cast<const char*>(&p), sizeof(p));
  m.append(reinterpret_cast<const char*>(connectorNonce), kNonceBytes);
  m.append(reinterpret_cast<const char*>(acceptorNonce), kNonceBytes);
  if (claimBytes) m.append(static_cast<const char*>(claim), claimBytes);
  return m;
}

inline void acceptorProof(const uint8_t* key, KeyPurpose purpose, const uint8_t* connectorNonce,
                          const uint8_t* acceptorNonce, uint8_t* out) {
  hmacSha256(key, kKeyBytes, proofMessage("acceptor", purpose, connectorNonce, acceptorNonce, nullptr, 0),
             out);
}

inline void connectorProof(const uint8_t* key, KeyPurpose purpose, const uint8_t* connectorNonce,
                           const uint8_t* acceptorNonce, const void* claim, size_t claimBytes, uint8_t* out) {
  hmacSha256(key, kKeyBytes,
             proofMessage("connector", purpose, connectorNonce, acceptorNonce, claim, claimBytes), out);
}

// Constant time: a mismatch does not tell how many leading bytes were right.
inline bool proofsEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < kProofBytes; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace mscclpp_nccl
