#include "native/algorithms/cost_model.h"

#include <algorithm>

namespace mscclpp_nccl {
namespace {

// Bytes per microsecond.
// The copy rates of perf/nccl_tests_table.py's floor; a GPU not named here is taken at an H100's.
constexpr double kH100CopyRate = 3.0e6;
constexpr double kH200CopyRate = 4.3e6;
constexpr double kNvlinkBusRate = 370e3;  // NVLink's all-reduce bus bandwidth on 8 H100s (without NVLS)
constexpr double kNetworkRate = 25e3;     // one 200 Gb/s NIC per rank
constexpr double kNetworkStepMicroseconds = 10.0;

bool reduces(Collective collective) {
  return collective == Collective::kAllReduce || collective == Collective::kReduceScatter ||
         collective == Collective::kReduce;
}

}  // namespace

CostModel::CostModel(const std::string& gpuName, int nranks, int ranksPerGpu, int hosts)
    : nranks_(std::max(1, nranks)),
      oneGpu_(ranksPerGpu >= nranks),
      hosts_(std::max(1, hosts)),
      copyBytesPerUs_(gpuName.find("H200") != std::string::npos ? kH200CopyRate : kH100CopyRate) {}

CostPath costPathOf(const Algorithm& algorithm, bool mapped) {
  if (mapped || algorithm.protocol == Protocol::kDirect) return CostPath::kMapped;
  return algorithm.protocol == Protocol::kPacket ? CostPath::kPacket : CostPath::kChunked;
}

double CostModel::fixedMicroseconds(CostPath path) const {
  // A call waits for every rank: its launch, its first signal and its last (fitted, see the header).
  const double n = nranks_;
  const double fixed = path == CostPath::kPacket    ? 2.5 + 0.6 * n
                       : path == CostPath::kChunked ? 2.0 + 1.5 * n
                                                    : 10.0 + 1.5 * n;  // mapped: two barriers
  return hosts_ > 1 ? fixed + kNetworkStepMicroseconds : fixed;
}

double CostModel::transferMicroseconds(double sharedGpuBytes, double busBytes, CostPath path,
                                       bool reduce) const {
  if (hosts_ > 1) return busBytes / kNetworkRate;
  if (!oneGpu_)
    return busBytes / (kNvlinkBusRate * (path == CostPath::kPacket ? 0.5 : 1.0));  // LL: half flags
  // Shares of the copy rate that each path reached in nccl-tests with every rank on one GPU.
  const double efficiency = path == CostPath::kPacket    ? (reduce ? 0.15 : 0.2)
                            : path == CostPath::kChunked ? 0.4
                                                         : (reduce ? 0.5 : 0.65);
  return sharedGpuBytes / (copyBytesPerUs_ * efficiency);
}

double CostModel::collectiveMicroseconds(Collective collective, size_t bytes, CostPath path) const {
  const double n = nranks_, b = static_cast<double>(bytes);
  // What every rank together reads and writes at least on one GPU, and what one rank sends over its
  // links (nccl-tests' bus bytes). An all-reduce's `bytes` is its message, every other call's a range.
  double shared = 0, bus = 0;
  switch (collective) {
    case Collective::kAllReduce:
      shared = 2 * n * b;
      bus = 2 * (n - 1) / n * b;
      break;
    case Collective::kAlltoAll:
      shared = 2 * n * n * b;
      bus = (n - 1) * b;
      break;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      shared = (n + 1) * n * b;
      bus = (n - 1) * b;
      break;
    case Collective::kBroadcast:
    case Collective::kReduce:
      shared = (n + 1) * b;
      bus = b;
      break;
    case Collective::kGather:
    case Collective::kScatter:
      shared = 2 * (n - 1) * b;  // every range but the root's own, read once and written once
      bus = (n - 1) * b;
      break;
    case Collective::kSendRecv:
      shared = 2 * n * b;
      bus = b;
      break;
  }
  return fixedMicroseconds(path) + transferMicroseconds(shared, bus, path, reduces(collective));
}

double CostModel::transfersMicroseconds(size_t sentBytes, size_t receivedBytes, CostPath path) const {
  // Every rank is taken to move as much as this one, as in nccl-tests' sendrecv.
  const double moved = static_cast<double>(sentBytes) + static_cast<double>(receivedBytes);
  const double bus = static_cast<double>(std::max(sentBytes, receivedBytes));
  return fixedMicroseconds(path) + transferMicroseconds(nranks_ * moved, bus, path, false);
}

}  // namespace mscclpp_nccl
