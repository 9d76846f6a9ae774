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

struct GroupTransfers {
  uint64_t epoch;
  std::vector<P2pOp> ops;
};

thread_local std::map<ncclComm*, GroupTransfers> tlsGroupTransfers;

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
  for (const std::vector<P2pOp>& pass : splitPasses(ops)) MSCCLPP_TRY(impl.sendRecv(pass, stream));
  return Status::kSuccess;
}

ncclResult_t transfer(bool isSend, void* buffer, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream, const char* function) {
  const ApiRange range(function, callPayload(comm, count, datatype, -1, peer));
  NCCL_TRY(checkReadyComm(comm, function));
  NCCL_TRY(checkTypeAndCount(datatype, count, function));
  if (peer < 0 || peer >= comm->nranks)
    return toNccl(
        fail(Status::kInvalidArgument, "%s: peer %d is not in [0, %d)", function, peer, comm->nranks));
  if (count > 0 && buffer == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "%s: NULL buffer with count %zu", function, count));
  size_t elementBytes = mscclpp_nccl::dataTypeSize(static_cast<mscclpp_nccl::DataType>(datatype));
  P2pOp op{isSend, peer, buffer, count * elementBytes, elementBytes};
  if (groupDepth() == 0)
    return enqueue(comm, stream, function, [op](Communicator& impl, cudaStream_t launch) {
      return launchTransfers(impl, launch, {op});
    });

  NCCL_TRY(checkStream(comm, stream, function));  // now, not only at ncclGroupEnd
  auto found = tlsGroupTransfers.find(comm);
  if (found != tlsGroupTransfers.end() && found->second.epoch == groupEpoch()) {
    found->second.ops.push_back(op);
    deferToGroupEnd(comm, stream, nullptr);  // the group's transfers join every stream they named
    return ncclSuccess;
  }
  tlsGroupTransfers[comm] = GroupTransfers{groupEpoch(), {op}};
  deferToGroupEnd(comm, stream, [comm](Communicator& impl, cudaStream_t launch) {
    GroupTransfers group = std::move(tlsGroupTransfers[comm]);
    tlsGroupTransfers.erase(comm);
    return launchTransfers(impl, launch, group.ops);
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
