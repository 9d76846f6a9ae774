// ncclSend / ncclRecv. Outside a group each call is its own transfer; inside one, a communicator's
// sends and receives are collected and run at ncclGroupEnd as one fused launch (per pass: the k-th
// transfer with each peer and direction), so that every direction progresses at once. Their streams
// may differ: the group's work then joins all of them, as NCCL does.
#include <map>
#include <utility>
#include <vector>

#include "native/algorithms/p2p.h"
#include "shim/enqueue.h"

using mscclpp_nccl::Communicator;
using mscclpp_nccl::fail;
using mscclpp_nccl::P2pOp;
using mscclpp_nccl::Status;

namespace {

// A communicator's transfers in the thread's current group. Slots are kept (comm null when free) and
// their lists keep their capacity, so that an eager group allocates nothing for them.
struct GroupTransfers {
  ncclComm* comm;
  uint64_t epoch;
  std::vector<P2pOp> ops;
};

thread_local std::vector<GroupTransfers> tlsGroupTransfers;

GroupTransfers* findTransfers(ncclComm* comm) {
  for (GroupTransfers& group : tlsGroupTransfers)
    if (group.comm == comm) return &group;
  return nullptr;
}

// The slot for comm's transfers in the current group: `stale`, the comm's slot from a group that was
// dropped unrun (null if none), else a free one.
GroupTransfers& newTransfers(ncclComm* comm, GroupTransfers* stale) {
  GroupTransfers* group = stale ? stale : findTransfers(nullptr);
  if (!group) group = &tlsGroupTransfers.emplace_back();
  group->comm = comm;
  group->epoch = groupEpoch();
  group->ops.clear();
  return *group;
}

// Whether no two transfers share a peer and a direction (then they all run in one pass).
bool onePass(const std::vector<P2pOp>& ops) {
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (ops[j].peer == ops[i].peer && ops[j].isSend == ops[i].isSend) return false;
  return true;
}

// Splits ops so that each pass holds at most one transfer per peer and direction, in call order.
std::vector<std::vector<P2pOp>> splitPasses(const std::vector<P2pOp>& ops) {
  std::vector<std::vector<P2pOp>> passes;
  std::map<std::pair<int, bool>, size_t> seen;
  for (const P2pOp& op : ops) {
    size_t pass = seen[{op.peer, op.isSend}]++;
    if (pass == passes.size()) passes.emplace_back();
    passes[pass].push_back(op);
  }
  return passes;
}

Status launchTransfers(Communicator& impl, cudaStream_t stream, const std::vector<P2pOp>& ops) {
  constexpr size_t kCheckedPairs = 16;  // bounds the pairwise check; larger groups split by map
  if (ops.size() <= kCheckedPairs && onePass(ops)) return impl.sendRecv(ops, stream);
  for (const std::vector<P2pOp>& pass : splitPasses(ops)) MSCCLPP_TRY(impl.sendRecv(pass, stream));
  return Status::kSuccess;
}

ncclResult_t transfer(bool isSend, void* buffer, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream, const char* function) {
  const ApiRange range(function, callPayload(comm, count, datatype, -1, peer));
  NCCL_TRY(checkReadyComm(comm, function));
  NCCL_TRY(checkTypeAndCount(datatype, count, function));
  NCCL_TRY(checkPeer(comm, peer, function));
  NCCL_TRY(checkBuffers(buffer, buffer, count, function));
  size_t elementBytes = mscclpp_nccl::dataTypeSize(static_cast<mscclpp_nccl::DataType>(datatype));
  P2pOp op{isSend, peer, buffer, count * elementBytes, elementBytes};
  if (groupDepth() == 0)
    return enqueue(comm, stream, function, [op](Communicator& impl, cudaStream_t launch) {
      return launchTransfers(impl, launch, {op});
    });

  NCCL_TRY(checkStream(comm, stream, function));  // now, not only at ncclGroupEnd
  GroupTransfers* found = findTransfers(comm);
  if (found && found->epoch == groupEpoch()) {
    found->ops.push_back(op);
    deferToGroupEnd(comm, stream, nullptr);  // the group's transfers join every stream they named
    return ncclSuccess;
  }
  newTransfers(comm, found).ops.push_back(op);
  deferToGroupEnd(
      comm, stream,
      [comm](Communicator& impl, cudaStream_t launch) {
        GroupTransfers* group = findTransfers(comm);
        if (!group) return fail(Status::kInternalError, "ncclGroupEnd: a group's transfers were lost");
        const Status status = launchTransfers(impl, launch, group->ops);
        group->comm = nullptr;  // the slot is free again; its list keeps its capacity
        return status;
      },
      [comm](const Communicator& impl) {
        const GroupTransfers* group = findTransfers(comm);
        return group ? impl.modeledMicroseconds(group->ops) : 0.0;
      });
  return ncclSuccess;
}

}  // namespace

NCCL_CALL_API(ncclResult_t, ncclSend,
              (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
               cudaStream_t stream),
              sendbuff, count, datatype, peer, comm, stream) {
  return transfer(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream, "ncclSend");
}

NCCL_CALL_API(ncclResult_t, ncclRecv,
              (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
               cudaStream_t stream),
              recvbuff, count, datatype, peer, comm, stream) {
  return transfer(false, recvbuff, count, datatype, peer, comm, stream, "ncclRecv");
}
