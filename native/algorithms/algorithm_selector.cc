#include "native/algorithms/algorithm_selector.h"

#include <algorithm>

#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

// One-shot moves (nranks-1) copies of the message but needs one step; two-shot moves 2(n-1)/n of it
// in two steps. Below this many bytes the saved step wins.
constexpr size_t kOneShotMaxBytes = 64 * 1024;

int blocksFor(size_t words, const SelectorContext& context) {
  size_t blocks = (words + kPacketThreads - 1) / kPacketThreads;
  return static_cast<int>(std::clamp<size_t>(blocks, 1, context.maxBlocks));
}

}  // namespace

Status runAllReduce(const PacketComm& comm, const SelectorContext& context, const AllReduceArgs& args,
                    cudaStream_t stream) {
  const size_t bytes = args.count * dataTypeSize(args.type);
  const size_t words = (bytes + kPacketPayloadBytes - 1) / kPacketPayloadBytes;
  if (bytes <= kOneShotMaxBytes || comm.nranks == 1) {
    LaunchShape shape{blocksFor(words, context), kPacketThreads};
    MSCCLPP_INFO(kTuning, "allreduce %zu bytes %s: one-shot packet, %d blocks", bytes,
                 dataTypeName(args.type), shape.blocks);
    return launchAllReduceOneShotPacket(comm, args, shape, stream);
  }
  LaunchShape shape{blocksFor((words + comm.nranks - 1) / comm.nranks, context), kPacketThreads};
  MSCCLPP_INFO(kTuning, "allreduce %zu bytes %s: two-shot packet, %d blocks", bytes, dataTypeName(args.type),
               shape.blocks);
  return launchAllReduceTwoShotPacket(comm, args, shape, stream);
}

Status runExchange(const PacketComm& comm, const SelectorContext& context, const ExchangeArgs& args,
                   cudaStream_t stream) {
  const size_t words = (args.rangeBytes + kPacketPayloadBytes - 1) / kPacketPayloadBytes;
  LaunchShape shape{blocksFor(words, context), kPacketThreads};
  MSCCLPP_INFO(kTuning, "exchange %zu bytes per peer %s: packet, %d blocks", args.rangeBytes,
               dataTypeName(args.type), shape.blocks);
  return launchExchange(comm, args, shape, stream);
}

}  // namespace mscclpp_nccl
