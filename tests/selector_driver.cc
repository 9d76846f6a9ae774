// Test driver for the algorithm selector (tests/test_selector.py builds it with g++ and the CUDA headers;
// no GPU is used).
//
//   selector_driver GPU_NAME NRANKS RANKS_PER_GPU RESIDENT_BLOCKS LANE_SLOT_BYTES SLOT_PACKETS
//     Sets a selector up as a communicator would (MSCCLPP_NCCL_ALGO and MSCCLPP_NCCL_TUNING_FILE come from
//     the environment), then answers choices read from stdin, one per line: "collective elementBytes
//     bytes [registered]" (registered: 1 when the buffers lie in mapped windows), with "algorithm blocks
//     threads chunkBytes source early" (early: 1 when the kernel launches early, as on sm_90).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "native/algorithms/algorithm_selector.h"

namespace mscclpp_nccl {

// The kernels are not linked here; runAllReduce/runExchange refer to them, and must never reach these.
namespace {
Status notLinked() { return Status::kInternalError; }
}  // namespace
Status launchAllReduceOneShotPacket(const PacketComm&, const AllReduceArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchAllReduceTwoShotPacket(const PacketComm&, const AllReduceArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchAllReduceTwoShotChunked(const LaneComm&, const AllReduceArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchAllReduceZeroCopy(const ZeroCopyComm&, const AllReduceArgs&, const PeerBuffers&,
                               const PeerBuffers&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchP2p(const P2pComm&, const std::vector<P2pOp>&, int, int, cudaStream_t) { return notLinked(); }
Status launchP2pChunked(const LaneComm&, const std::vector<P2pOp>&, int, int, cudaStream_t) {
  return notLinked();
}
Status launchExchange(const PacketComm&, const ExchangeArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchExchangeChunked(const LaneComm&, const ExchangeArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}

}  // namespace mscclpp_nccl

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s GPU_NAME NRANKS RANKS_PER_GPU RESIDENT_BLOCKS LANE_SLOT_BYTES SLOT_PACKETS\n",
            argv[0]);
    return 2;
  }
  mscclpp_nccl::AlgorithmSelector selector;
  selector.init(argv[1], atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  selector.setLaneSlotBytes(strtoull(argv[5], nullptr, 10));
  selector.setSlotPackets(strtoull(argv[6], nullptr, 10));
  selector.setEarlyLaunch(true);
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string name;
    size_t elementBytes = 0, bytes = 0;
    mscclpp_nccl::Collective collective;
    if (!(words >> name >> elementBytes >> bytes) || !mscclpp_nccl::collectiveFromName(name, &collective)) {
      printf("BAD QUERY %s\n", line.c_str());
      continue;
    }
    int registered = 0;
    words >> registered;
    mscclpp_nccl::Choice choice = selector.choose(collective, elementBytes, bytes, registered != 0);
    printf("%s %d %d %zu %s %d\n", choice.algorithm->name, choice.shape.blocks, choice.shape.threads,
           choice.shape.chunkBytes, choice.source, choice.shape.earlyLaunch ? 1 : 0);
  }
  return 0;
}
