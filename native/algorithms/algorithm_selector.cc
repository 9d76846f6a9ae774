#include "native/algorithms/algorithm_selector.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <sstream>

#include "native/common/env.h"
#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

// One-shot moves (nranks-1) copies of the message but needs one step; two-shot moves 2(n-1)/n of it
// in two steps. Below this many bytes the saved step wins.
constexpr size_t kOneShotMaxBytes = 64 * 1024;
// Packets carry half their bytes in flags, chunks pay a semaphore round trip per step: above these
// sizes the chunks' bandwidth wins (all-reduce: the message; exchanges: the range per rank).
constexpr size_t kTwoShotPacketMaxBytes = 1 << 20;
constexpr size_t kExchangePacketMaxBytes = 512 * 1024;
// Send/recv: above this a transfer moves in chunks on lanes (packets waste half of every store on
// flags, which NVLink feels most).
constexpr size_t kP2pPacketMaxBytes = 1 << 20;
// Default chunked grid: one block per this many bytes of the range each rank moves per peer.
constexpr size_t kLaneBlockBytes = 16 * 1024;
// Zero-copy pays two barriers per call (12-14 us at 4 ranks on one H200, 7 at 2, 16-20 at 8) where
// packets pay flags: from this size on (windows only) moving the message once wins (measured crossover
// between 512 KB and 2 MB at 2, 4 and 8 ranks).
constexpr size_t kZeroCopyMinBytes = 1 << 20;
// Zero-copy exchanges (outside windows) from this many bytes per range, with enough traffic (below):
// smaller ranges pay the barriers for too little. At 4 ranks on one H200 the mapped kernel was level
// with the chunked exchange at 2 MB ranges and up to 2.3x faster from 4 MB (perf/nccl_timer.cu); at 8
// ranks the chunked alltoall of 1 MB ranges (64 MB moved) took 106 us in nccl-tests graphs where stock
// took 85, so 1 MB ranges map where their traffic is large.
constexpr size_t kExchangeZeroCopyMinBytes = 1 << 20;
// ...and from this much traffic: the mapped call's fixed cost (its barriers) is paid back by the scratch
// copies it saves, which grow with the bytes all ranks move, not with the range alone. On one H200 at
// 2, 4 and 8 ranks the chunked exchange was faster below it (reduce at 4 ranks, 2 MB: 16.6 against 21.6
// us in graphs), the mapped one level or faster from it (perf/nccl_timer.cu, forced either way).
constexpr size_t kExchangeZeroCopyMinTraffic = 16 << 20;
// Default zero-copy grid: one block per this many bytes of the segment each rank reduces (a block
// moves 2 x nranks times that), so that medium messages use many SMs.
constexpr size_t kDirectBlockBytes = 4 * 1024;

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

}  // namespace

void AlgorithmSelector::init(const std::string& gpuName, int nranks, int ranksPerGpu, int residentBlocks) {
  nranks_ = nranks;
  residentBlocks_ = std::max(1, residentBlocks);

  std::string forced = envString("MSCCLPP_NCCL_ALGO");
  if (!forced.empty() && !parseForced(forced)) logWarn("ignoring MSCCLPP_NCCL_ALGO=%s", forced.c_str());
  fingerprint_ = fnv1a(forced);

  std::string path = envString("MSCCLPP_NCCL_TUNING_FILE");
  if (path.empty()) path = shippedTablePath();
  if (!path.empty() && fileExists(path)) {
    TuningTable full;
    std::string bytes;  // the fingerprint hashes what was parsed: the file is read once, bounded
    if (TuningTable::load(path, algorithmNames(), &full, &bytes) == Status::kSuccess) {
      table_ = full.filtered(gpuName, nranks, ranksPerGpu);
      table_.source = path;
      fingerprint_ = fnv1a(bytes, fingerprint_);
      MSCCLPP_INFO(kTuning, "tuning table %s: %zu of %zu entries apply to %s, %d ranks, %d per GPU",
                   path.c_str(), table_.entryCount(), full.entryCount(), gpuName.c_str(), nranks,
                   ranksPerGpu);
    } else {
      // load() already printed why; say what happens instead.
      logWarn("ignoring tuning table %s; using built-in rules", path.c_str());
    }
  } else if (!envString("MSCCLPP_NCCL_TUNING_FILE").empty()) {
    logWarn("MSCCLPP_NCCL_TUNING_FILE=%s does not exist; using built-in rules", path.c_str());
  }
}

void AlgorithmSelector::dropOverrides() {
  forced_ = {};
  table_ = TuningTable();
  fingerprint_ = 0;
}

// Items: [collective=]algorithm[/blocks[/threads[/chunk_bytes]]], comma-separated.
bool AlgorithmSelector::parseForced(const std::string& text) {
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    std::string collectiveText;
    size_t equals = item.find('=');
    if (equals != std::string::npos) {
      collectiveText = item.substr(0, equals);
      item = item.substr(equals + 1);
    }
    std::stringstream fields(item);
    std::string name;
    std::getline(fields, name, '/');
    const Algorithm* algorithm = findAlgorithm(name);
    if (!algorithm) return false;
    TuningChoice choice;
    choice.algorithm = name;
    long long numbers[3] = {0, 0, 0};
    std::string number;
    for (int i = 0; i < 3 && std::getline(fields, number, '/'); ++i) {
      char* end = nullptr;
      numbers[i] = strtoll(number.c_str(), &end, 10);
      // Blocks and threads are ints: a larger number would be cut to another shape, not refused.
      if (number.empty() || *end != '\0' || numbers[i] < 0 || (i < 2 && numbers[i] > INT_MAX)) return false;
    }
    choice.blocks = static_cast<int>(numbers[0]);
    choice.threads = static_cast<int>(numbers[1]);
    choice.chunkBytes = static_cast<size_t>(numbers[2]);
    for (int c = 0; c < kNumCollectives; ++c) {
      Collective collective = static_cast<Collective>(c);
      bool named = !collectiveText.empty();
      if (named && collectiveText != collectiveName(collective)) continue;
      if (!algorithm->serves(collective)) {
        if (named) return false;
        continue;
      }
      forced_[c] = Forced{algorithm, choice};
    }
  }
  return true;
}

LaunchShape AlgorithmSelector::shapeFor(const Algorithm& algorithm, const TuningChoice& choice,
                                        size_t bytes) const {
  return withEarlyLaunch(gridFor(algorithm, choice, bytes), earlyLaunchBlocks());
}

LaunchShape AlgorithmSelector::gridFor(const Algorithm& algorithm, const TuningChoice& choice,
                                       size_t bytes) const {
  // The bytes each rank's kernel moves per peer: the range, or a segment for the two-shot schedules.
  size_t range = bytes;
  if (algorithm.id == AlgorithmId::kAllReduceTwoShotPacket ||
      algorithm.id == AlgorithmId::kReduceTwoShotPacket ||
      algorithm.id == AlgorithmId::kAllReduceTwoShotChunked ||
      algorithm.id == AlgorithmId::kAllReduceZeroCopy)
    range = (bytes + nranks_ - 1) / nranks_;
  LaunchShape shape{};
  if (algorithm.protocol == Protocol::kDirect) {
    size_t blocks = choice.blocks > 0 ? choice.blocks : (range + kDirectBlockBytes - 1) / kDirectBlockBytes;
    shape.blocks = static_cast<int>(std::clamp<size_t>(blocks, 1, directBlocks()));
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
  // Default grid: a block per kLaneBlockBytes of the range; chunks split the range evenly over the
  // blocks, in whole units, at most a slot.
  size_t blocks = choice.blocks > 0 ? choice.blocks : (range + kLaneBlockBytes - 1) / kLaneBlockBytes;
  shape.blocks = static_cast<int>(std::clamp<size_t>(blocks, 1, laneBlocks()));
  int threads = choice.threads > 0 ? choice.threads / 32 * 32 : kLaneThreads;
  shape.threads = std::clamp(threads, 32, kLaneThreads);
  size_t chunk = choice.chunkBytes > 0 ? choice.chunkBytes : (range + shape.blocks - 1) / shape.blocks;
  chunk = (chunk + kLaneAlignment - 1) / kLaneAlignment * kLaneAlignment;
  shape.chunkBytes = std::clamp<size_t>(chunk, kLaneAlignment, laneSlotBytes_);
  return shape;
}

bool AlgorithmSelector::usable(const Algorithm& algorithm, Collective collective, size_t bytes,
                               bool registered) const {
  return algorithm.accepts(collective, nranks_, bytes, registered) &&
         (algorithm.protocol != Protocol::kChunked || laneSlotBytes_ >= kLaneAlignment);
}

Choice AlgorithmSelector::choose(Collective collective, size_t elementBytes, size_t bytes,
                                 bool registered) const {
  const Forced& forced = forced_[static_cast<int>(collective)];
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

}  // namespace

bool AlgorithmSelector::mapsBuffers(Collective collective, size_t elementBytes, size_t bytes,
                                    bool preMultiply) const {
  const bool allReduce = collective == Collective::kAllReduce;
  // PreMulSum's per-rank scalars stay on scratch; a forced algorithm is what an experiment asked for.
  if (!mapsBuffers_ || preMultiply || collective == Collective::kSendRecv ||
      bytes < (allReduce ? kZeroCopyMinBytes : kExchangeZeroCopyMinBytes) ||
      (!allReduce && exchangeTraffic(collective, bytes, nranks_) < kExchangeZeroCopyMinTraffic) ||
      forced_[static_cast<int>(collective)].algorithm)
    return false;
  if (nranks_ > kMaxZeroCopyRanks) return false;
  // Every collective maps above the thresholds whatever the table says: the tuner times forced
  // algorithms, which never map, so its choice of packets over chunks there does not weigh the mapped
  // call (nccl-tests, 4 ranks on one H200, in graphs: all_gather at 2 MB ranges, packets 45 us, mapped
  // 30; all_reduce at 2 MB, packets 40 us, mapped at 8 MB 47). Calls whose buffers are not mapped yet
  // run the chunked schedule, in the mapped kernel.
  (void)elementBytes;
  return usable(chunkedFallback(collective), collective, bytes, false);
}

Choice AlgorithmSelector::mappedFallback(Collective collective, size_t elementBytes, size_t bytes) const {
  const Choice chosen = choose(collective, elementBytes, bytes);
  if (chosen.algorithm->protocol == Protocol::kChunked) return chosen;
  const Algorithm& chunked = chunkedFallback(collective);
  return Choice{&chunked, shapeFor(chunked, TuningChoice{}, bytes), "rules"};
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

namespace {

void logChoice(Collective collective, size_t bytes, DataType type, const Choice& choice) {
  MSCCLPP_INFO(kTuning, "%s %zu bytes %s: %s (%s), %d blocks x %d threads, %zu-byte chunks",
               collectiveName(collective), bytes, dataTypeName(type), choice.algorithm->name, choice.source,
               choice.shape.blocks, choice.shape.threads, choice.shape.chunkBytes);
}

// "ready": this rank's buffers are mapped by every peer (zero-copy runs if every rank's are).
void logMapped(Collective collective, size_t bytes, DataType type, const MappedCall& mapped,
               const LaunchShape& shape, const Choice& scratch) {
  MSCCLPP_INFO(kTuning, "%s %zu bytes %s: zero-copy (mapped, %s), %d blocks x %d threads; else %s (%s)",
               collectiveName(collective), bytes, dataTypeName(type),
               mapped.send.ready && mapped.recv.ready ? "ready" : "not ready", shape.blocks, shape.threads,
               scratch.algorithm->name, scratch.source);
}

// A mapped call: one kernel on every rank, which goes zero-copy where every rank's buffers are mapped
// by every peer and else runs the chunked schedule of `scratch` itself.
template <typename Args, typename LaunchMapped>
Status runMapped(const Transports& transports, const AlgorithmSelector& selector, Collective collective,
                 size_t bytes, const Args& call, const MappedCall& mapped, size_t movedBytes,
                 const Choice& scratch, cudaStream_t stream, LaunchMapped launchMapped) {
  const LaunchShape shape = selector.mappedShape(movedBytes, scratch.shape);
  logMapped(collective, bytes, call.type, mapped, shape, scratch);
  return launchMapped(transports.direct, transports.lanes, call, mapped, shape, scratch.shape, stream);
}

}  // namespace

Status runAllReduce(const Transports& transports, const AlgorithmSelector& selector,
                    const AllReduceArgs& args, const DirectBuffers* direct, const MappedCall* mapped,
                    cudaStream_t stream, uint64_t* published) {
  *published = 0;
  const size_t bytes = args.count * dataTypeSize(args.type);
  if (mapped)
    return runMapped(transports, selector, Collective::kAllReduce, bytes, args, *mapped, bytes,
                     selector.mappedFallback(Collective::kAllReduce, dataTypeSize(args.type), bytes), stream,
                     launchAllReduceMapped);
  // Zero-copy reads peers' inputs raw: PreMulSum's per-rank scalars would have to travel too.
  const bool registered = direct != nullptr && !args.op.scaling.preMultiply;
  Choice choice = selector.choose(Collective::kAllReduce, dataTypeSize(args.type), bytes, registered);
  logChoice(Collective::kAllReduce, bytes, args.type, choice);
  switch (choice.algorithm->id) {
    case AlgorithmId::kAllReduceZeroCopy:
      return launchAllReduceZeroCopy(transports.direct, args, direct->send, direct->recv, choice.shape,
                                     stream);
    case AlgorithmId::kAllReduceTwoShotChunked:
      return launchAllReduceTwoShotChunked(transports.lanes, args, choice.shape, stream);
    case AlgorithmId::kAllReduceTwoShotPacket:
      MSCCLPP_TRY(launchAllReduceTwoShotPacket(transports.packets, args, choice.shape, stream));
      break;
    default:
      MSCCLPP_TRY(launchAllReduceOneShotPacket(transports.packets, args, choice.shape, stream));
  }
  *published = args.ticket;  // the packet kernels end through endSteps, which publishes it
  return Status::kSuccess;
}

Status runExchange(const Transports& transports, const AlgorithmSelector& selector, const ExchangeArgs& args,
                   const MappedCall* mapped, cudaStream_t stream, uint64_t* published) {
  *published = 0;
  if (mapped)
    return runMapped(transports, selector, args.collective, args.rangeBytes, args, *mapped,
                     args.rangeBytes * transports.direct.nranks,
                     selector.mappedFallback(args.collective, dataTypeSize(args.type), args.rangeBytes),
                     stream, launchExchangeMapped);
  Choice choice = selector.choose(args.collective, dataTypeSize(args.type), args.rangeBytes);
  logChoice(args.collective, args.rangeBytes, args.type, choice);
  if (choice.algorithm->id == AlgorithmId::kExchangeChunked)
    return launchExchangeChunked(transports.lanes, args, choice.shape, stream);
  if (choice.algorithm->id == AlgorithmId::kReduceTwoShotPacket)
    MSCCLPP_TRY(launchReduceTwoShotPacket(transports.packets, args, choice.shape, stream));
  else
    MSCCLPP_TRY(launchExchange(transports.packets, args, choice.shape, stream));
  *published = args.ticket;
  return Status::kSuccess;
}

// A kernel's lanes travel as one parameter of at most kMaxP2pLanes, so each path runs a pass as kernels
// of the transfers with peers in consecutive ranges of distance (a send to rank + d, a receive from
// rank - d), as many distances per kernel as a send and a receive of full lanes allow. Both ends see a
// transfer at the same distance and on the same path (chosen by its size), so each kernel's transfers
// pair up across the ranks; every rank launches the packet kernels, then the chunked ones, in distance
// order, so none waits on a kernel that is not running.
constexpr int kPacketDistancesPerKernel = kMaxP2pLanes / (2 * kMaxP2pLaneBlocks);
constexpr int kChunkDistancesPerKernel = kMaxP2pLanes / (2 * kMaxP2pChunkLanes);
static_assert(kChunkDistancesPerKernel >= 1 && kPacketDistancesPerKernel >= 1,
              "a kernel must hold a send and a receive of full lanes");

Status runSendRecv(const Transports& transports, const AlgorithmSelector& selector,
                   const std::vector<P2pOp>& ops, uint64_t ticket, cudaStream_t stream, uint64_t* published) {
  *published = 0;
  const int rank = transports.p2p.packets.rank, nranks = transports.p2p.packets.nranks;
  // Kernel k of a path holds the distances in (k * perKernel, (k + 1) * perKernel]; self, kernel 0.
  auto kernelOf = [](int distance, int perKernel) { return distance == 0 ? 0 : (distance - 1) / perKernel; };
  // The thread keeps the per-kernel lists, with their capacity: an eager group allocates nothing here.
  thread_local std::vector<std::vector<P2pOp>> packets, chunks;
  auto reset = [](std::vector<std::vector<P2pOp>>& kernels, size_t count) {
    kernels.resize(count);
    for (std::vector<P2pOp>& kernel : kernels) kernel.clear();
  };
  reset(packets, kernelOf(nranks - 1, kPacketDistancesPerKernel) + 1);
  reset(chunks, kernelOf(nranks - 1, kChunkDistancesPerKernel) + 1);
  for (const P2pOp& op : ops) {
    const int distance = ((op.isSend ? op.peer - rank : rank - op.peer) + nranks) % nranks;
    const Choice choice = selector.choose(Collective::kSendRecv, op.elementBytes, op.bytes);
    const bool chunked = choice.algorithm->id == AlgorithmId::kP2pChunked && op.peer != rank &&
                         transports.p2pLanes.localScratch != nullptr;
    MSCCLPP_INFO(kTuning, "sendrecv %zu bytes %s peer %d: %s (%s)", op.bytes, op.isSend ? "to" : "from",
                 op.peer, chunked ? "p2p_chunked" : "p2p_packet", choice.source);
    if (chunked)
      chunks[kernelOf(distance, kChunkDistancesPerKernel)].push_back(op);
    else
      packets[kernelOf(distance, kPacketDistancesPerKernel)].push_back(op);
  }
  // The chunked kernels publish no ticket: the last packet kernel publishes it when no chunked one follows.
  auto launches = [rank](const std::vector<P2pOp>& kernel) { return p2pLaunchesKernel(kernel, rank); };
  size_t publisher = packets.size();  // none
  if (std::none_of(chunks.begin(), chunks.end(), launches))
    for (size_t k = 0; k < packets.size(); ++k)
      if (launches(packets[k])) publisher = k;
  for (size_t k = 0; k < packets.size(); ++k)
    if (!packets[k].empty())  // transfers to self only still copy
      MSCCLPP_TRY(launchP2p(transports.p2p, packets[k], selector.maxBlocks(), selector.earlyLaunchBlocks(),
                            k == publisher ? ticket : 0, stream));
  if (publisher < packets.size()) *published = ticket;
  for (const std::vector<P2pOp>& kernel : chunks)
    if (launches(kernel))
      MSCCLPP_TRY(launchP2pChunked(transports.p2pLanes, kernel, selector.laneBlocks(),
                                   selector.earlyLaunchBlocks(), stream));
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
