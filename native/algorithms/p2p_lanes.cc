#include <algorithm>

#include "native/algorithms/p2p.h"
#include "native/common/logging.h"

namespace mscclpp_nccl {

Status cutIntoLanes(const std::vector<P2pOp>& ops, int self, int (*lanesFor)(size_t bytes, size_t param),
                    size_t param, P2pLanes* out, size_t* elementBytes) {
  out->count = 0;
  *elementBytes = 8;
  for (const P2pOp& op : ops) {
    if (!crossesRanks(op, self)) continue;
    *elementBytes = std::min(*elementBytes, op.elementBytes);
    const int lanes = lanesFor(op.bytes, param);
    for (int lane = 0; lane < lanes; ++lane) {
      if (out->count == kMaxP2pLanes)
        return fail(Status::kInvalidUsage, "a group holds more point-to-point transfers than %d lanes",
                    kMaxP2pLanes);
      out->lane[out->count++] = P2pLane{static_cast<char*>(op.buffer),
                                        op.bytes,
                                        op.peer,
                                        static_cast<uint8_t>(op.isSend),
                                        static_cast<uint8_t>(lane),
                                        static_cast<uint8_t>(lanes)};
    }
  }
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
