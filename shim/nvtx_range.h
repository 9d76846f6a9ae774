// NVTX ranges around the C API, opened as stock NCCL opens them: in the "NCCL" domain, named after the
// entry point ("ncclAllReduce"), collectives and point-to-point calls carrying the communicator, the
// message size, the datatype, the reduction and the root or peer as a payload. Nsight Systems timelines
// of PyTorch jobs then read the same on this library. NVTX3 is header-only (CUDA's include/nvtx3):
// without a tool attached, a range costs a few nanoseconds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

// What a collective's range carries (one NVTX payload schema, registered once).
struct CallPayload {
  uint64_t comm;     // the ncclComm_t handle (NCCL puts a hash shared by the ranks here)
  uint64_t bytes;    // the message size on this rank, as nccl-tests counts it
  int32_t datatype;  // ncclDataType_t
  int32_t op;        // ncclRedOp_t, -1 when the call reduces nothing
  int32_t root;      // the root or the peer, -1 when there is none
};

// The payload of a call of `count` elements of `type` (op and root -1 where the call has none).
CallPayload callPayload(ncclComm_t comm, size_t count, ncclDataType_t type, int op, int root);

class ApiRange {
 public:
  explicit ApiRange(const char* function);
  ApiRange(const char* function, const CallPayload& payload);
  ~ApiRange();
  ApiRange(const ApiRange&) = delete;
  ApiRange& operator=(const ApiRange&) = delete;
};
