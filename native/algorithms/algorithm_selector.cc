#include "native/algorithms/algorithm_selector.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>

#include "native/common/logging.h"
#include "native/common/parameters.h"

namespace mscclpp_nccl {
namespace {

// One-shot moves (nranks-1) copies of the message but needs one step; two-shot moves 2(n-1)/n of it
// in two steps. Below this many bytes the saved step wins.
constexpr size_t kOneShotMaxBytes = 64 * 1024;
// Packets carry half their bytes in flags, chunks pay a semaphore round trip per step: above these
// sizes the chunks' bandwidth wins (all-reduce: the message; exchanges: the range per rank).
constexpr size_t kTwoShotPacketMaxBytes = 1 << 20;
constexpr size_t kExchangePacketMaxBytes = 512 * 1024;
// A reduce's one-step exchange leaves the root to reduce every rank's whole range; from 8 ranks the
// two-shot packet reduce, which spreads that over the ranks, wins from this size up to
// kTwoShotPacketMaxBytes. nccl-tests at 8 ranks on one H100, graphs / eager: 256 KB 11.7 / 15.1 us against
// 14.9 / 17.2 for the one-step exchange (stock 16.5 / 16.1), 128 KB 11.4 / 14.9 against 10.8 / 13.2;
// 512 KB 18.0 / 21.5 against 27.2 / 29.6 (stock 22.6 / 25.9). The tuner on one H200 chose it from 512 KB
// (11.8 / 14.9 against stock 18.5 / 22.5). At 4 ranks the chunked exchange was as fast at 1 MB (one H100,
// in graphs: 16.4 against 17.3 us).
constexpr int kReduceTwoShotMinRanks = 8;
constexpr size_t kReduceTwoShotMinBytes = 256 << 10;
// Send/recv: above this a transfer moves in chunks (packets waste half of every store on flags, which
// NVLink feels most). nccl-tests graphs on one H200: 1 MB on packets took 16.0 / 19.5 / 47.3 us at 2 / 4 /
// 8 ranks, on chunks 10.6 / 12.7 / 16.2; 512 KB 9.6 / 11.5 / 25.9 against 14.6 / 15.8 / 17.5.
constexpr size_t kP2pPacketMaxBytes = 512 << 10;
// Default chunked grid: one block per this many bytes of the range each rank moves per peer.
constexpr size_t kChunkBlockBytes = 16 * 1024;
// Zero-copy pays two barriers per call where packets pay flags: 12-14 us at 4 ranks on one H200, 7 at 2,
// 16-20 at 8, at system scope (device scope, where every rank shares the GPU, takes 3-7 us off at 4
// ranks on one H100). From this size on (windows only) moving the message once wins: the crossover
// lay between 512 KB and 2 MB at 2, 4 and 8 ranks, measured before device scope.
constexpr size_t kZeroCopyMinBytes = 1 << 20;
// Zero-copy exchanges (outside windows) from this many bytes per range, with enough traffic (below):
// smaller ranges pay the barriers for too little. With the traffic bar this binds from 8 ranks on: there
// the chunked exchange of 256-512 KB ranges loses to the mapped one (nccl-tests graphs, 8 ranks on one
// H100: reduce_scatter of 4 MB 78.5 against 41.3 us, alltoall 82.3 against 47.1, all_gather 53.8 against
// 33.7); smaller ranges were not tried.
constexpr size_t kExchangeZeroCopyMinBytes = 256 << 10;
// ...and from this much traffic: the mapped call's fixed cost (its barriers) is paid back by the scratch
// copies it saves, which grow with the bytes all ranks move, not with the range alone. At 2 ranks the
// chunked exchange was as fast or faster below 16 MB (nccl-tests graphs on one H100: all_gather of 2 MB
// ranges 12.6 against 15.2 us mapped, alltoall 11.6 against 16.7). From 4 ranks a given traffic is cut
// into smaller ranges, which chunks move less well, and 8 MB is enough (4 ranks: reduce_scatter of 512
// KB ranges 25.7 against 18.4 us, alltoall 24.2 against 21.2, all_gather 17.5 against 16.4, reduce of 2
// MB 24.2 against 18.8; broadcast level; 8 ranks: reduce of 1 MB 34.1 against 23.5). 3 ranks: untried.
constexpr size_t kExchangeZeroCopyMinTraffic = 16 << 20;
constexpr size_t kExchangeZeroCopyMinTrafficManyRanks = 8 << 20;
// Gather and scatter, whose chunked schedule runs every range through the root, map from less traffic
// from 8 ranks on: 4 MB (512 KB ranges) on one H100 in graphs / eager, mapped against chunked, gather
// 24.1 / 28.7 against 29.8 / 32.7 us (stock 29.6 / 27.8), scatter 17.4 / 28.9 against 27.7 / 31.8 (stock
// 37.9 / 37.0); at 4 ranks the same bar lost (4 MB, 1 MB ranges: gather 16.5 / 20.9 against 11.8 / 11.9).
constexpr int kRootedCopyLowTrafficMinRanks = 8;
constexpr size_t kRootedCopyZeroCopyMinTraffic = 4 << 20;
// Default zero-copy grid: one block per this many bytes of the segment each rank reduces (a block
// moves 2 x nranks times that), so that medium messages use many SMs.
constexpr size_t kDirectBlockBytes = 4 * 1024;
// From this many bytes moved in all, a zero-copy grid takes every block the communicator holds, the
// parked kernel's share too; below, the extra blocks' barriers cost more than their bandwidth brings.
// nccl-tests at 4 ranks on one H100, in graphs, 33 blocks against 22: all_gather 4 MB 26.2 against 23.8
// us, 16 MB 50.5 against 58.1; all_reduce 1 MB 18.8 against 17.0, 64 MB 246 against 278, 256 MB 947
// against 1090 (reductions 1.14-1.23x faster from 64 MB, copies 1.03-1.11x).
constexpr size_t kDirectWholeShareMinBytes = 16 << 20;

uint64_t fnv1a(const std::string& text, uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

bool fileExists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// The table shipped in the Python package: <package>/tuning/default.json, beside lib/libnccl.so.2.
std::string shippedTablePath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&shippedTablePath), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string library = info.dli_fname;
  size_t slash = library.rfind('/');
  if (slash == std::string::npos) return "";
  return library.substr(0, slash) + "/../tuning/default.json";
}

size_t wordsOf(size_t bytes) { return (bytes + kPacketPayloadBytes - 1) / kPacketPayloadBytes; }

// "NVIDIA H100 80GB HBM3 (sm_90)", or the name alone where the architecture is unknown.
std::string gpuText(const std::string& name, const std::string& arch) {
  return arch.empty() ? name : name + " (" + arch + ")";
}

}  // namespace

void AlgorithmSelector::init(const std::string& gpuName, const std::string& gpuArch, int nranks,
                             int ranksPerGpu, int residentBlocks) {
  nranks_ = nranks;
  residentBlocks_ = std::max(1, residentBlocks);

  std::string forced = readText(Param::kAlgo);
  if (!forced.empty() && !parseForcedAlgorithms(forced, &forced_))
    logWarn("ignoring MSCCLPP_NCCL_ALGO=%s", forced.c_str());
  fingerprint_ = fnv1a(forced);

  const std::string named = readText(Param::kTuningFile);
  const std::string path = named.empty() ? shippedTablePath() : named;
  if (!path.empty() && fileExists(path)) {
    TuningTable full;
    std::string bytes;  // the fingerprint hashes what was parsed: the file is read once, bounded
    if (TuningTable::load(path, algorithmNames(), &full, &bytes) == Status::kSuccess) {
      table_ = full.filtered(gpuName, gpuArch, nranks, ranksPerGpu);
      table_.source = path;
      fingerprint_ = fnv1a(bytes, fingerprint_);
      const bool standIn = !full.namesGpu(gpuName) && table_.entryCount() > 0;
      const std::string gpu = gpuText(gpuName, gpuArch);
      MSCCLPP_INFO(kTuning, "tuning table %s: %zu of %zu entries apply to %s, %d ranks, %d per GPU%s",
                   path.c_str(), table_.entryCount(), full.entryCount(), gpu.c_str(), nranks, ranksPerGpu,
                   standIn ? " (entries for another GPU of its architecture)" : "");
      // Once per process: a table tuned elsewhere must not pass for one tuned here.
      static std::atomic<bool> toldNoEntry{false};
      if (table_.entryCount() == 0 && full.entryCount() > 0 && !toldNoEntry.exchange(true))
        logWarn(
            "tuning table %s has no entry for %s, %d ranks, %d per GPU: the built-in rules choose (python -m "
            "mscclpp_nccl info --table shows them; python -m mscclpp_nccl tune measures this machine)",
            path.c_str(), gpu.c_str(), nranks, ranksPerGpu);
    } else {
      // load() already printed why; say what happens instead.
      logWarn("ignoring tuning table %s; using built-in rules", path.c_str());
    }
  } else if (!named.empty()) {
    logWarn("MSCCLPP_NCCL_TUNING_FILE=%s does not exist; using built-in rules", path.c_str());
  }
}

void AlgorithmSelector::dropOverrides() {
  forced_ = {};
  table_ = TuningTable();
  fingerprint_ = 0;
}

LaunchShape AlgorithmSelector::shapeFor(const Algorithm& algorithm, const TuningChoice& choice,
                                        size_t bytes) const {
  return withEarlyLaunch(gridFor(algorithm, choice, bytes), earlyLaunchBlocks());
}

LaunchShape AlgorithmSelector::gridFor(const Algorithm& algorithm, const TuningChoice& choice,
                                       size_t bytes) const {
  // The bytes each rank's kernel moves per peer: the range, or a segment for the two-shot schedules.
  const size_t range = algorithm.segmented ? (bytes + nranks_ - 1) / nranks_ : bytes;
  LaunchShape shape{};
  if (algorithm.protocol == Protocol::kDirect) {
    size_t blocks = choice.blocks > 0 ? choice.blocks : (range + kDirectBlockBytes - 1) / kDirectBlockBytes;
    const int most =
        bytes >= kDirectWholeShareMinBytes ? directBlocks() : std::min(residentBlocks_, directBlocks());
    shape.blocks = static_cast<int>(std::clamp<size_t>(blocks, 1, most));
    int threads = choice.threads > 0 ? choice.threads / 32 * 32 : kZeroCopyThreads;
    shape.threads = std::clamp(threads, 32, kZeroCopyThreads);
    shape.chunkBytes = 0;  // each block takes an even share of the segment
    return shape;
  }
  if (algorithm.protocol == Protocol::kPacket) {
    // Default grid: one word per thread per peer range. Chunks: the range split evenly over the blocks
    // (a block given a whole slot would do every word of a small message alone), whole words, at most
    // a slot.
    size_t words = wordsOf(range);
    size_t blocks = choice.blocks > 0 ? choice.blocks : (words + kPacketThreads - 1) / kPacketThreads;
    shape.blocks = static_cast<int>(std::clamp<size_t>(blocks, 1, maxBlocks()));
    int threads = choice.threads > 0 ? choice.threads / 32 * 32 : kPacketThreads;
    shape.threads = std::clamp(threads, 32, kPacketThreads);
    size_t chunk = choice.chunkBytes > 0 ? choice.chunkBytes / kPacketPayloadBytes
                                         : (words + shape.blocks - 1) / shape.blocks;
    shape.chunkBytes = std::clamp<size_t>(chunk, 1, slotPackets_) * kPacketPayloadBytes;
    return shape;
  }
  // Default grid: a block per kChunkBlockBytes of the range; chunks split the range evenly over the
  // blocks, in whole units, at most a slot.
  size_t blocks = choice.blocks > 0 ? choice.blocks : (range + kChunkBlockBytes - 1) / kChunkBlockBytes;
  shape.blocks = static_cast<int>(std::clamp<size_t>(blocks, 1, chunkBlocks()));
  int threads = choice.threads > 0 ? choice.threads / 32 * 32 : kChunkThreads;
  shape.threads = std::clamp(threads, 32, kChunkThreads);
  size_t chunk = choice.chunkBytes > 0 ? choice.chunkBytes : (range + shape.blocks - 1) / shape.blocks;
  chunk = (chunk + kChunkAlignment - 1) / kChunkAlignment * kChunkAlignment;
  shape.chunkBytes = std::clamp<size_t>(chunk, kChunkAlignment, chunkSlotBytes_);
  return shape;
}

bool AlgorithmSelector::usable(const Algorithm& algorithm, Collective collective, size_t bytes,
                               bool registered) const {
  return algorithm.accepts(collective, nranks_, bytes, registered) &&
         (algorithm.protocol != Protocol::kChunked || chunkSlotBytes_ >= kChunkAlignment);
}

Choice AlgorithmSelector::choose(Collective collective, size_t elementBytes, size_t bytes,
                                 bool registered) const {
  const ForcedAlgorithm& forced = forced_[static_cast<int>(collective)];
  if (forced.algorithm && usable(*forced.algorithm, collective, bytes, registered))
    return Choice{forced.algorithm, shapeFor(*forced.algorithm, forced.choice, bytes), "forced"};
  // Tables are measured on unregistered buffers: windows above the threshold go zero-copy first.
  const Algorithm& direct = algorithm(AlgorithmId::kAllReduceZeroCopy);
  if (bytes >= kZeroCopyMinBytes && usable(direct, collective, bytes, registered))
    return Choice{&direct, shapeFor(direct, TuningChoice{}, bytes), "rules"};
  if (table_.entryCount() > 0) {
    const TuningChoice* tuned =
        table_.find(collectiveName(collective), static_cast<int>(elementBytes), bytes);
    const Algorithm* algorithm = tuned ? findAlgorithm(tuned->algorithm) : nullptr;
    if (algorithm && usable(*algorithm, collective, bytes, registered))
      return Choice{algorithm, shapeFor(*algorithm, *tuned, bytes), "table"};
  }
  AlgorithmId id =
      bytes <= kExchangePacketMaxBytes ? AlgorithmId::kExchangePacket : AlgorithmId::kExchangeChunked;
  if (collective == Collective::kAllReduce) {
    id = bytes <= kOneShotMaxBytes || nranks_ == 1 ? AlgorithmId::kAllReduceOneShotPacket
         : bytes <= kTwoShotPacketMaxBytes         ? AlgorithmId::kAllReduceTwoShotPacket
                                                   : AlgorithmId::kAllReduceTwoShotChunked;
  }
  if (collective == Collective::kReduce && nranks_ >= kReduceTwoShotMinRanks &&
      bytes >= kReduceTwoShotMinBytes && bytes <= kTwoShotPacketMaxBytes)
    id = AlgorithmId::kReduceTwoShotPacket;
  if (collective == Collective::kSendRecv)
    id = bytes <= kP2pPacketMaxBytes ? AlgorithmId::kP2pPacket : AlgorithmId::kP2pChunked;
  if (!usable(algorithm(id), collective, bytes, registered))
    id = collective == Collective::kAllReduce  ? AlgorithmId::kAllReduceTwoShotPacket
         : collective == Collective::kSendRecv ? AlgorithmId::kP2pPacket
                                               : AlgorithmId::kExchangePacket;
  const Algorithm& fallback = algorithm(id);
  return Choice{&fallback, shapeFor(fallback, TuningChoice{}, bytes), "rules"};
}

namespace {

// The chunked schedule a mapped call of `collective` runs itself when some rank's buffers are not mapped.
const Algorithm& chunkedFallback(Collective collective) {
  return algorithm(collective == Collective::kAllReduce ? AlgorithmId::kAllReduceTwoShotChunked
                                                        : AlgorithmId::kExchangeChunked);
}

// Bytes an exchange of `rangeBytes` ranges moves over all ranks: a rooted one a range per rank, the
// others a range per pair of ranks.
size_t exchangeTraffic(Collective collective, size_t rangeBytes, int nranks) {
  return rangeBytes * nranks * (isRooted(collective) ? 1 : nranks);
}

size_t exchangeZeroCopyMinTraffic(Collective collective, int nranks) {
  const bool rootedCopy = collective == Collective::kGather || collective == Collective::kScatter;
  if (rootedCopy && nranks >= kRootedCopyLowTrafficMinRanks) return kRootedCopyZeroCopyMinTraffic;
  return nranks >= 4 ? kExchangeZeroCopyMinTrafficManyRanks : kExchangeZeroCopyMinTraffic;
}

}  // namespace

bool AlgorithmSelector::mapsBuffers(Collective collective, size_t bytes, bool preMultiply) const {
  const bool allReduce = collective == Collective::kAllReduce;
  // PreMulSum's per-rank scalars stay on scratch; a forced algorithm is what an experiment asked for.
  if (!mapsBuffers_ || preMultiply || collective == Collective::kSendRecv ||
      bytes < (allReduce ? kZeroCopyMinBytes : kExchangeZeroCopyMinBytes) ||
      (!allReduce &&
       exchangeTraffic(collective, bytes, nranks_) < exchangeZeroCopyMinTraffic(collective, nranks_)) ||
      forced_[static_cast<int>(collective)].algorithm)
    return false;
  if (nranks_ > kMaxZeroCopyRanks) return false;
  // Every collective maps above the thresholds whatever the table says: the tuner times forced
  // algorithms, which never map, so its choice of packets over chunks there does not weigh the mapped
  // call (nccl-tests, 4 ranks on one H200, in graphs: all_gather at 2 MB ranges, packets 45 us, mapped
  // 30; all_reduce at 2 MB, packets 40 us, mapped at 8 MB 47). Calls whose buffers are not mapped yet
  // run the chunked schedule, in the mapped kernel.
  return usable(chunkedFallback(collective), collective, bytes, false);
}

Choice AlgorithmSelector::mappedFallback(Collective collective, size_t elementBytes, size_t bytes) const {
  const Choice chosen = choose(collective, elementBytes, bytes);
  if (chosen.algorithm->protocol == Protocol::kChunked) return chosen;
  const Algorithm& chunked = chunkedFallback(collective);
  return Choice{&chunked, shapeFor(chunked, TuningChoice{}, bytes), "rules"};
}

CallPlan AlgorithmSelector::plan(const CallShape& call) const {
  if (!call.inWindows && mapsBuffers(call.collective, call.bytes, call.preMultiply)) {
    const Choice scratch = mappedFallback(call.collective, call.elementBytes, call.bytes);
    // The zero-copy grid follows the bytes the call moves in all: an exchange moves a range per rank.
    const size_t moved = call.collective == Collective::kAllReduce ? call.bytes : call.bytes * nranks_;
    return CallPlan{scratch.algorithm, mappedShape(moved, scratch.shape), scratch.shape, true, scratch.source,
                    call.bytes};
  }
  // Zero-copy in windows reads peers' inputs raw: PreMulSum's per-rank scalars would have to travel too.
  const Choice chosen =
      choose(call.collective, call.elementBytes, call.bytes, call.inWindows && !call.preMultiply);
  return CallPlan{chosen.algorithm, chosen.shape, LaunchShape{}, false, chosen.source, call.bytes};
}

CostPath AlgorithmSelector::costPath(const CallShape& call) const {
  if (call.collective == Collective::kSendRecv && mapsBuffers_ && call.bytes >= kP2pZeroCopyMinBytes)
    return CostPath::kMapped;
  const CallPlan chosen = plan(call);
  return costPathOf(*chosen.algorithm, chosen.mapped);
}

LaunchShape AlgorithmSelector::directShape(size_t bytes) const {
  return shapeFor(algorithm(AlgorithmId::kAllReduceZeroCopy), TuningChoice{}, bytes);
}

LaunchShape AlgorithmSelector::mappedShape(size_t bytes, const LaunchShape& scratch) const {
  // One grid serves both: the zero-copy partition spreads over all of it, the chunked schedule takes
  // its own blocks (both at most 64, within the rank's co-resident share).
  LaunchShape shape = directShape(bytes);
  shape.blocks = std::max(shape.blocks, scratch.blocks);
  shape.threads = std::max(shape.threads, scratch.threads);
  return withEarlyLaunch(shape, earlyLaunchBlocks());
}

}  // namespace mscclpp_nccl
