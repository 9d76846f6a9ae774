#include <algorithm>

#include "native/algorithms/p2p.h"
#include "native/common/logging.h"

namespace mscclpp_nccl {

Status cutIntoParts(const std::vector<P2pOp>& ops, int self, int (*partsFor)(size_t bytes, size_t param),
                    size_t param, P2pParts* out, size_t* elementBytes) {
  out->count = 0;
  *elementBytes = 8;
  for (const P2pOp& op : ops) {
    if (!crossesRanks(op, self)) continue;
    *elementBytes = std::min(*elementBytes, op.elementBytes);
    const int parts = partsFor(op.bytes, param);
    for (int part = 0; part < parts; ++part) {
      if (out->count == kMaxP2pParts)
        return fail(Status::kInvalidUsage, "a group holds more point-to-point transfer parts than %d",
                    kMaxP2pParts);
      out->part[out->count++] = P2pPart{static_cast<char*>(op.buffer),
                                        op.bytes,
                                        op.peer,
                                        static_cast<uint8_t>(op.isSend),
                                        static_cast<uint8_t>(part),
                                        static_cast<uint8_t>(parts),
                                        0};
    }
  }
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
