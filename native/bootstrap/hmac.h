// HMAC-SHA256 (RFC 2104) over sha256.h: the bootstrap's proofs that a peer holds the job key.
// Header-only, like sha256.h, so that every build of the bootstrap gets it without another source file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "native/bootstrap/sha256.h"

namespace mscclpp_nccl {

inline void hmacSha256(const uint8_t* key, size_t keyBytes, const std::string& message, uint8_t out[32]) {
  constexpr size_t kBlock = 64;
  uint8_t block[kBlock] = {};
  if (keyBytes > kBlock)  // a long key is hashed first (RFC 2104)
    sha256(std::string(reinterpret_cast<const char*>(key), keyBytes), block);
  else
    for (size_t i = 0; i < keyBytes; ++i) block[i] = key[i];
  std::string inner(kBlock, '\0'), outer(kBlock, '\0');
  for (size_t i = 0; i < kBlock; ++i) {
    inner[i] = static_cast<char>(block[i] ^ 0x36);
    outer[i] = static_cast<char>(block[i] ^ 0x5c);
  }
  uint8_t innerHash[32];
  sha256(inner + message, innerHash);
  sha256(outer + std::string(reinterpret_cast<const char*>(innerHash), sizeof(innerHash)), out);
}

}  // namespace mscclpp_nccl
