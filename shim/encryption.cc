// ncclSetEncryption. The rendezvous authenticates every peer (an HMAC under the job's key, see README's
// security model) but does not encrypt what it carries, and no user data crosses a socket: asking for no
// encryption, or passing NULL (stock's default), succeeds; a pre-shared key is refused, since nothing
// here could honour it.
#include "shim/api.h"

NCCL_API(ncclResult_t, ncclSetEncryption, (const ncclEncryptionConfig_t* config), config) {
  using mscclpp_nccl::fail;
  using mscclpp_nccl::Status;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != NCCL_API_MAGIC)
    return toNccl(fail(Status::kInvalidArgument,
                       "ncclSetEncryption: the config has a bad magic: initialize it with "
                       "NCCL_ENCRYPTION_CONFIG_INITIALIZER"));
  if (config->mode == NCCL_ENCRYPTION_MODE_NONE) return ncclSuccess;
  if (config->mode == NCCL_ENCRYPTION_MODE_PSK)
    return toNccl(fail(Status::kInvalidUsage,
                       "ncclSetEncryption: socket encryption with a pre-shared key is not implemented by "
                       "mscclpp-nccl (its rendezvous authenticates peers but does not encrypt)"));
  return toNccl(fail(Status::kInvalidArgument, "ncclSetEncryption: unknown mode %d", config->mode));
}
