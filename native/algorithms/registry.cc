#include "native/algorithms/registry.h"

#include <cstdint>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/exchange.h"
#include "native/algorithms/transports.h"
#include "native/algorithms/zero_copy.h"
#include "native/primitives/chunk_layout.h"

namespace mscclpp_nccl {
namespace {

constexpr uint32_t bit(Collective c) { return 1u << static_cast<int>(c); }

// Each launcher on the transport its protocol uses.
Status oneShotPacket(const Transports& t, const AllReduceArgs& args, const LaunchShape& shape,
                     const DirectBuffers*, cudaStream_t stream) {
  return launchAllReduceOneShotPacket(t.packets, args, shape, stream);
}
Status twoShotPacket(const Transports& t, const AllReduceArgs& args, const LaunchShape& shape,
                     const DirectBuffers*, cudaStream_t stream) {
  return launchAllReduceTwoShotPacket(t.packets, args, shape, stream);
}
Status twoShotChunked(const Transports& t, const AllReduceArgs& args, const LaunchShape& shape,
                      const DirectBuffers*, cudaStream_t stream) {
  return launchAllReduceTwoShotChunked(t.chunks, args, shape, stream);
}
Status zeroCopyInWindows(const Transports& t, const AllReduceArgs& args, const LaunchShape& shape,
                         const DirectBuffers* windows, cudaStream_t stream) {
  return launchAllReduceZeroCopy(t.direct, args, windows->send, windows->recv, shape, stream);
}
Status exchangePacket(const Transports& t, const ExchangeArgs& args, const LaunchShape& shape,
                      cudaStream_t stream) {
  return launchExchange(t.packets, args, shape, stream);
}
Status exchangeChunked(const Transports& t, const ExchangeArgs& args, const LaunchShape& shape,
                       cudaStream_t stream) {
  return launchExchangeChunked(t.chunks, args, shape, stream);
}
Status reduceTwoShotPacket(const Transports& t, const ExchangeArgs& args, const LaunchShape& shape,
                           cudaStream_t stream) {
  return launchReduceTwoShotPacket(t.packets, args, shape, stream);
}

}  // namespace

const std::vector<Algorithm>& algorithms() {
  constexpr uint32_t kExchangeCollectives = bit(Collective::kAllGather) | bit(Collective::kReduceScatter) |
                                            bit(Collective::kAlltoAll) | bit(Collective::kBroadcast) |
                                            bit(Collective::kReduce) | bit(Collective::kGather) |
                                            bit(Collective::kScatter);
  // Listed in AlgorithmId order.
  static const std::vector<Algorithm> kAlgorithms = {
      {AlgorithmId::kAllReduceOneShotPacket, "allreduce_one_shot_packet", Protocol::kPacket,
       bit(Collective::kAllReduce), 1 << 16, SIZE_MAX, 1, false, false,
       "every rank sends all of its input to every peer in LL packets; one step", oneShotPacket, nullptr,
       true},
      {AlgorithmId::kAllReduceTwoShotPacket, "allreduce_two_shot_packet", Protocol::kPacket,
       bit(Collective::kAllReduce), 1 << 16, SIZE_MAX, 1, false, true,
       "reduce-scatter then all-gather in LL packets; two steps per chunk", twoShotPacket, nullptr, true},
      {AlgorithmId::kAllReduceTwoShotChunked, "allreduce_two_shot_chunked", Protocol::kChunked,
       bit(Collective::kAllReduce), kMaxChunkRanks, SIZE_MAX, 1, false, true,
       "reduce-scatter then all-gather in plain 16-byte chunks with semaphores, many blocks", twoShotChunked,
       nullptr, false},
      {AlgorithmId::kExchangePacket, "exchange_packet", Protocol::kPacket, kExchangeCollectives, 1 << 16,
       SIZE_MAX, 1, false, false, "equal ranges between ranks in LL packets, tokens where no data flows",
       nullptr, exchangePacket, true},
      {AlgorithmId::kExchangeChunked, "exchange_chunked", Protocol::kChunked, kExchangeCollectives,
       kMaxChunkRanks, SIZE_MAX, 1, false, false,
       "equal ranges between ranks in plain chunks with semaphores, many blocks", nullptr, exchangeChunked,
       false},
      // Send/recv runs a group's transfers in passes of its own (send_recv.h), not through these.
      {AlgorithmId::kP2pPacket, "p2p_packet", Protocol::kPacket, bit(Collective::kSendRecv), 1 << 16,
       SIZE_MAX, 1, false, false,
       "per-peer channels of LL packets with acknowledgements, one fused kernel per group", nullptr, nullptr,
       true},
      {AlgorithmId::kAllReduceZeroCopy, "allreduce_zero_copy", Protocol::kDirect, bit(Collective::kAllReduce),
       kMaxZeroCopyRanks, SIZE_MAX, 1, true, true,
       "two-shot reading every rank's input and writing every rank's output directly (windows)",
       zeroCopyInWindows, nullptr, false},
      {AlgorithmId::kP2pChunked, "p2p_chunked", Protocol::kChunked, bit(Collective::kSendRecv),
       kMaxChunkRanks, SIZE_MAX, 1, false, false,
       "per-peer channels of plain 64 KiB chunks with semaphores, one fused kernel per group", nullptr,
       nullptr, false},
      {AlgorithmId::kReduceTwoShotPacket, "reduce_two_shot_packet", Protocol::kPacket,
       bit(Collective::kReduce), 1 << 16, SIZE_MAX, 1, false, true,
       "reduce-scatter, then each rank's reduced segment to the root, in LL packets; two steps per chunk",
       nullptr, reduceTwoShotPacket, true},
  };
  return kAlgorithms;
}

const Algorithm* findAlgorithm(const std::string& name) {
  for (const Algorithm& a : algorithms())
    if (name == a.name) return &a;
  return nullptr;
}

const Algorithm& algorithm(AlgorithmId id) { return algorithms()[static_cast<int>(id)]; }

std::vector<std::string> algorithmNames() {
  std::vector<std::string> names;
  for (const Algorithm& a : algorithms()) names.push_back(a.name);
  return names;
}

}  // namespace mscclpp_nccl
