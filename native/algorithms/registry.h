// Every algorithm the library has, with the conditions it accepts. The selector picks among them;
// the tuning table and MSCCLPP_NCCL_ALGO name them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "native/algorithms/collective.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

// The collective named `name` (collectiveName's inverse).
bool collectiveFromName(const std::string& name, Collective* out);

enum class AlgorithmId : int {
  kAllReduceOneShotPacket,
  kAllReduceTwoShotPacket,
  kAllReduceTwoShotChunked,
  kExchangePacket,
  kExchangeChunked,
  kP2pPacket,
  kAllReduceZeroCopy,
  kP2pChunked,
  kReduceTwoShotPacket
};

// How an algorithm moves data: LL packets (latency), plain chunks with semaphores (bandwidth), or directly
// between the users' buffers (zero-copy, windows only). Decides which scratch slots bound its chunk size.
enum class Protocol : int { kPacket, kChunked, kDirect };

struct Transports;
struct AllReduceArgs;
struct ExchangeArgs;
struct LaunchShape;
struct DirectBuffers;

// How an algorithm's kernel is launched for one call, on the communicator's transports. `windows`: the
// call's buffers in mapped windows (null unless both are).
using AllReduceLaunch = Status (*)(const Transports& transports, const AllReduceArgs& args,
                                   const LaunchShape& shape, const DirectBuffers* windows,
                                   cudaStream_t stream);
using ExchangeLaunch = Status (*)(const Transports& transports, const ExchangeArgs& args,
                                  const LaunchShape& shape, cudaStream_t stream);

struct Algorithm {
  AlgorithmId id;
  const char* name;
  Protocol protocol;
  uint32_t collectives;  // bit c: serves Collective c
  int maxRanks;          // largest communicator it accepts
  size_t maxBytes;       // largest message it accepts (SIZE_MAX: any)
  size_t alignment;      // buffer alignment it needs, in bytes (1: any element offset)
  bool needsRegisteredBuffers;
  bool segmented;  // each rank's kernel moves a 1/nranks segment of the message per peer (two-shot)
  const char* summary;
  AllReduceLaunch launchAllReduce;  // null unless it serves all_reduce
  ExchangeLaunch launchExchange;    // null unless it serves the exchange collectives
  bool publishesTicket;             // its kernel publishes the call's ticket when done (step_sequence.cuh)

  bool serves(Collective collective) const { return (collectives >> static_cast<int>(collective)) & 1u; }
  bool accepts(Collective collective, int nranks, size_t bytes, bool registered) const {
    return serves(collective) && nranks <= maxRanks && bytes <= maxBytes &&
           (registered || !needsRegisteredBuffers);
  }
};

const std::vector<Algorithm>& algorithms();
const Algorithm* findAlgorithm(const std::string& name);
const Algorithm& algorithm(AlgorithmId id);
std::vector<std::string> algorithmNames();

}  // namespace mscclpp_nccl
