#include "native/algorithms/allreduce_direct.cuh"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/type_shards.cuh"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// Buffers in windows: rank r's are its window base plus the offset every rank shares.
template <typename T, typename Op>
__global__ void __launch_bounds__(kZeroCopyThreads)
    allReduceZeroCopyKernel(ZeroCopyComm comm, AllReduceArgs args, PeerBuffers send, PeerBuffers recv,
                            size_t segmentBytes, size_t blockBytes, bool early) {
  enterKernel(early);
  __shared__ DirectPart part;
  const int me = comm.rank, nranks = comm.nranks;
  if (threadIdx.x == 0) locatePart(part, me, args.count * sizeof(T), segmentBytes, blockBytes);
  __syncthreads();
  for (int r = threadIdx.x; r < nranks; r += blockDim.x)
    setRankBuffers(part, r, send.bases[r] + send.offset, recv.bases[r] + recv.offset);
  BoundedWait wait(comm.wait);
  const uint64_t call = comm.calls[blockIdx.x] + 1;
  if (!arriveAtZeroCopyCall(comm, call, wait)) return;
  if (!reduceAndFinish<T, Op>(comm, args, part, call, wait)) return;
  endZeroCopyCall(comm, call);
}

}  // namespace

using AllReduceZeroCopyKernel = void (*)(ZeroCopyComm, AllReduceArgs, PeerBuffers, PeerBuffers, size_t,
                                         size_t, bool);

// The kernel for `args` among those of type shard kShard (type_shards.cuh).
template <int kShard>
AllReduceZeroCopyKernel allReduceZeroCopyKernelOf(const AllReduceArgs& args);

template <>
AllReduceZeroCopyKernel allReduceZeroCopyKernelOf<kThisTypeShard>(const AllReduceArgs& args) {
  auto kernel = [](auto type, auto op) {
    return allReduceZeroCopyKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>;
  };
  return dispatchReduce(args.type, args.op.op, heldKernels<AllReduceZeroCopyKernel>(kernel));
}

#if MSCCLPP_NCCL_HOST_SHARD
Status launchAllReduceZeroCopy(const ZeroCopyComm& comm, const AllReduceArgs& args, const PeerBuffers& send,
                               const PeerBuffers& recv, LaunchShape shape, cudaStream_t stream) {
  MSCCLPP_TRY(checkDirect(comm, args, shape));
  const AllReduceZeroCopyKernel kernel = withTypeShard(args.type, args.op.op, true, [&](auto shard) {
    return allReduceZeroCopyKernelOf<decltype(shard)::value>(args);
  });
  return launchDirect(kernel, comm, args, shape, stream, send, recv);
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
