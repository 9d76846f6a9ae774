// ncclPutSignal, ncclSignal and ncclWaitSignal: one-sided operations into peers' windows
// (native/algorithms/one_sided.h). Like NCCL, they run eagerly only; inside a group they run at
// ncclGroupEnd in call order with the comm's other work.
#include <vector>

#include "shim/arg_checks.h"
#include "shim/enqueue.h"
#include "shim/window_lookup.h"

using mscclpp_nccl::Communicator;
using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

NCCL_GROUP_API(ncclResult_t, ncclPutSignal,
               (const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                cudaStream_t stream),
               localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, comm, stream) {
  constexpr const char* kFunction = "ncclPutSignal";
  NCCL_TRY(checkReadyComm(comm, kFunction));
  NCCL_TRY(checkTypeAndCount(datatype, count, kFunction));
  NCCL_TRY(checkBuffers(localbuff, localbuff, count, kFunction));
  NCCL_TRY(checkPeer(comm, peer, kFunction));
  NCCL_TRY(checkSignalSlot(sigIdx, ctx, flags, kFunction));
  const mscclpp_nccl::SymmetricWindow* window = nativeWindow(comm, peerWin);
  if (window == nullptr)
    return toNccl(
        fail(Status::kInvalidArgument, "%s: peerWin is not a registered window of this comm", kFunction));
  NCCL_TRY(checkNotCapturing(stream, kFunction));
  const size_t bytes = count * mscclpp_nccl::dataTypeSize(static_cast<mscclpp_nccl::DataType>(datatype));
  return enqueue(comm, stream, kFunction, [=](Communicator& impl, cudaStream_t launch) {
    return impl.putSignal(localbuff, bytes, peer, *window, peerWinOffset, launch);
  });
}

NCCL_GROUP_API(ncclResult_t, ncclSignal,
               (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream),
               peer, sigIdx, ctx, flags, comm, stream) {
  NCCL_TRY(checkReadyComm(comm, "ncclSignal"));
  NCCL_TRY(checkPeer(comm, peer, "ncclSignal"));
  NCCL_TRY(checkSignalSlot(sigIdx, ctx, flags, "ncclSignal"));
  NCCL_TRY(checkNotCapturing(stream, "ncclSignal"));
  return enqueue(comm, stream, "ncclSignal",
                 [=](Communicator& impl, cudaStream_t launch) { return impl.signal(peer, launch); });
}

NCCL_GROUP_API(ncclResult_t, ncclWaitSignal,
               (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream), nDesc,
               signalDescs, comm, stream) {
  constexpr const char* kFunction = "ncclWaitSignal";
  NCCL_TRY(checkReadyComm(comm, kFunction));
  if (nDesc < 0 || (nDesc > 0 && signalDescs == nullptr))
    return toNccl(fail(Status::kInvalidArgument, "%s: %d descriptors at %p", kFunction, nDesc,
                       static_cast<void*>(signalDescs)));
  std::vector<uint64_t> counts(comm->nranks, 0);
  for (int i = 0; i < nDesc; ++i) {
    const ncclWaitSignalDesc_t& desc = signalDescs[i];
    NCCL_TRY(checkPeer(comm, desc.peer, kFunction));
    NCCL_TRY(checkSignalSlot(desc.sigIdx, desc.ctx, 0, kFunction));
    if (desc.opCnt < 0)
      return toNccl(
          fail(Status::kInvalidArgument, "%s: descriptor %d waits for %d signals", kFunction, i, desc.opCnt));
    counts[desc.peer] += static_cast<uint64_t>(desc.opCnt);
  }
  NCCL_TRY(checkNotCapturing(stream, kFunction));
  return enqueue(comm, stream, kFunction, [counts](Communicator& impl, cudaStream_t launch) {
    return impl.waitSignals(counts, launch);
  });
}
