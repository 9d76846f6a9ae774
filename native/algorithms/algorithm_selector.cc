#include "native/algorithms/algorithm_selector.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "native/common/env.h"
#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

// One-shot moves (nranks-1) copies of the message but needs one step; two-shot moves 2(n-1)/n of it
// in two steps. Below this many bytes the saved step wins.
constexpr size_t kOneShotMaxBytes = 64 * 1024;

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

std::string readFile(const std::string& path) {
  FILE* file = fopen(path.c_str(), "rb");
  if (!file) return "";
  std::string text;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
  fclose(file);
  return text;
}

size_t wordsOf(size_t bytes) { return (bytes + kPacketPayloadBytes - 1) / kPacketPayloadBytes; }

}  // namespace

void AlgorithmSelector::init(const std::string& gpuName, int nranks, int ranksPerGpu, int maxBlocks) {
  nranks_ = nranks;
  maxBlocks_ = std::max(1, maxBlocks);

  std::string forced = envString("MSCCLPP_NCCL_ALGO");
  if (!forced.empty() && !parseForced(forced)) logWarn("ignoring MSCCLPP_NCCL_ALGO=%s", forced.c_str());
  fingerprint_ = fnv1a(forced);

  std::string path = envString("MSCCLPP_NCCL_TUNING_FILE");
  if (path.empty()) path = shippedTablePath();
  if (!path.empty() && fileExists(path)) {
    TuningTable full;
    if (TuningTable::load(path, algorithmNames(), &full) == Status::kSuccess) {
      table_ = full.filtered(gpuName, nranks, ranksPerGpu);
      table_.source = path;
      fingerprint_ = fnv1a(readFile(path), fingerprint_);
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
      if (number.empty() || *end != '\0' || numbers[i] < 0) return false;
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
  // Default grid: one word per thread per peer range, within the co-residency cap.
  size_t words = wordsOf(bytes);
  if (algorithm.id == AlgorithmId::kAllReduceTwoShotPacket) words = (words + nranks_ - 1) / nranks_;
  LaunchShape shape;
  size_t blocks = choice.blocks > 0 ? choice.blocks : (words + kPacketThreads - 1) / kPacketThreads;
  shape.blocks = static_cast<int>(std::clamp<size_t>(blocks, 1, maxBlocks_));
  int threads = choice.threads > 0 ? choice.threads / 32 * 32 : kPacketThreads;
  shape.threads = std::clamp(threads, 32, kPacketThreads);
  size_t chunk = choice.chunkBytes > 0 ? choice.chunkBytes / kPacketPayloadBytes : slotPackets_;
  shape.chunkWords = std::clamp<size_t>(chunk, 1, slotPackets_);
  return shape;
}

Choice AlgorithmSelector::choose(Collective collective, size_t elementBytes, size_t bytes) const {
  const Forced& forced = forced_[static_cast<int>(collective)];
  if (forced.algorithm && forced.algorithm->accepts(collective, nranks_, bytes))
    return Choice{forced.algorithm, shapeFor(*forced.algorithm, forced.choice, bytes), "forced"};
  if (table_.entryCount() > 0) {
    const TuningChoice* tuned =
        table_.find(collectiveName(collective), static_cast<int>(elementBytes), bytes);
    const Algorithm* algorithm = tuned ? findAlgorithm(tuned->algorithm) : nullptr;
    if (algorithm && algorithm->accepts(collective, nranks_, bytes))
      return Choice{algorithm, shapeFor(*algorithm, *tuned, bytes), "table"};
  }
  AlgorithmId id = AlgorithmId::kExchangePacket;
  if (collective == Collective::kAllReduce)
    id = bytes <= kOneShotMaxBytes || nranks_ == 1 ? AlgorithmId::kAllReduceOneShotPacket
                                                   : AlgorithmId::kAllReduceTwoShotPacket;
  if (collective == Collective::kSendRecv) id = AlgorithmId::kP2pPacket;
  const Algorithm& fallback = algorithm(id);
  return Choice{&fallback, shapeFor(fallback, TuningChoice{}, bytes), "rules"};
}

namespace {

void logChoice(Collective collective, size_t bytes, DataType type, const Choice& choice) {
  MSCCLPP_INFO(kTuning, "%s %zu bytes %s: %s (%s), %d blocks x %d threads, %zu-byte chunks",
               collectiveName(collective), bytes, dataTypeName(type), choice.algorithm->name, choice.source,
               choice.shape.blocks, choice.shape.threads, choice.shape.chunkWords * kPacketPayloadBytes);
}

}  // namespace

Status runAllReduce(const PacketComm& comm, const AlgorithmSelector& selector, const AllReduceArgs& args,
                    cudaStream_t stream) {
  const size_t bytes = args.count * dataTypeSize(args.type);
  Choice choice = selector.choose(Collective::kAllReduce, dataTypeSize(args.type), bytes);
  logChoice(Collective::kAllReduce, bytes, args.type, choice);
  if (choice.algorithm->id == AlgorithmId::kAllReduceTwoShotPacket)
    return launchAllReduceTwoShotPacket(comm, args, choice.shape, stream);
  return launchAllReduceOneShotPacket(comm, args, choice.shape, stream);
}

Status runExchange(const PacketComm& comm, const AlgorithmSelector& selector, Collective collective,
                   const ExchangeArgs& args, cudaStream_t stream) {
  Choice choice = selector.choose(collective, dataTypeSize(args.type), args.rangeBytes);
  logChoice(collective, args.rangeBytes, args.type, choice);
  return launchExchange(comm, args, choice.shape, stream);
}

}  // namespace mscclpp_nccl
