#include "native/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>

#include "native/algorithms/kernel_preload.h"
#include "native/algorithms/run_plan.h"
#include "native/algorithms/send_recv.h"
#include "native/bootstrap/sha256.h"
#include "native/common/arithmetic.h"
#include "native/common/logging.h"
#include "native/common/parameters.h"
#include "native/fallback/fallback_mode.h"
#include "native/routed_communicator.h"
#include "native/stall_monitor.h"
#include "native/transport/cuda_check.h"
#include "native/transport/peer_access.h"
#include "native/transport/setup_copy.h"

namespace mscclpp_nccl {
namespace {

constexpr size_t kMinChunkSlotBytes = 4096;
constexpr size_t kMaxChunkSlotBytes = 256 * 1024;
constexpr int kShareIdTag = 0x5eed;

// Where the one-sided signal counters start in the sync region: after the barrier flags, aligned.
size_t signalCountersAt(int nranks) { return roundUp(zeroCopyFlagBytes(nranks), 8); }

// Scratch per rank: MSCCLPP_NCCL_SCRATCH_BYTES, rounded so every slot holds whole packets.
size_t slotPacketsFor(int nranks) {
  size_t bytes = static_cast<size_t>(readInteger(Param::kScratchBytes));
  size_t slot = bytes / packetScratchBytes(nranks, 1);
  return std::max<size_t>(slot, 32);
}

// Chunk slot bytes: MSCCLPP_NCCL_CHUNK_SCRATCH_BYTES shared by `blocks` channels per pair of ranks, in
// whole units within [4 KiB, 256 KiB]; 0 (no chunk channels) past kMaxChunkRanks ranks.
size_t chunkSlotBytesFor(int blocks, int nranks) {
  if (nranks > kMaxChunkRanks) return 0;
  // The variable's earlier name, MSCCLPP_NCCL_LANE_SCRATCH_BYTES, still counts where the new one is unset.
  const Parameter& chunk = parameter(Param::kChunkScratchBytes);
  size_t bytes =
      static_cast<size_t>(parameterSet(chunk) ? readInteger(chunk) : readInteger(Param::kLaneScratchBytes));
  size_t slot =
      bytes / (static_cast<size_t>(blocks) * nranks * kChunkStages) / kChunkAlignment * kChunkAlignment;
  return std::clamp(slot, kMinChunkSlotBytes, kMaxChunkSlotBytes);
}

// What the selector plans an all-reduce by (its message), and an exchange (its range per rank); the
// launch and the model (ncclGroupSimulateEnd) both plan from these.
CallShape allReduceShape(const AllReduceArgs& args, bool inWindows) {
  const size_t elementBytes = dataTypeSize(args.type);
  return {Collective::kAllReduce, elementBytes, args.count * elementBytes, inWindows,
          args.op.scaling.preMultiply};
}

CallShape exchangeShape(const ExchangeArgs& args) {
  return {args.collective, dataTypeSize(args.type), args.rangeBytes, false,
          args.reduce && args.op.scaling.preMultiply};
}

}  // namespace

// Where each kernel family's counters lie in the communicator's one allocation of device words.
Communicator::CounterLayout::CounterLayout(int nranks, int chunkBlocks) {
  auto carve = [this](size_t count) { return std::exchange(words, words + count); };
  const size_t p2pStepWords = static_cast<size_t>(nranks) * kMaxPacketBlocks;
  steps = carve(kMaxPacketBlocks);
  blocksDone = carve(1);
  p2pSend = carve(p2pStepWords);
  p2pRecv = carve(p2pStepWords);
  chunks = carve(chunkCounterWords(chunkBlocks, nranks));
  calls = carve(kMaxZeroCopyBlocks);
  p2pChunks = carve(chunkCounterWords(kMaxP2pChunkParts, nranks));
  stopped = carve(1);
  ticket = carve(1);
}

Status Communicator::create(const UniqueId& id, int rank, int nranks, std::unique_ptr<Communicator>* out,
                            AbortLink* link, CommRole role) {
  std::unique_ptr<Bootstrap> bootstrap;
  MSCCLPP_TRY(Bootstrap::create(id, rank, nranks, bootstrapTimeoutSeconds(), &bootstrap, link));
  std::unique_ptr<Communicator> comm(new Communicator());
  // What NCCL prints as commHash: a name of the communicator shared by its ranks (the id's secret
  // does not show through a one-way hash).
  uint8_t digest[32];
  sha256(std::string(id.bytes, sizeof(id.bytes)), digest);
  memcpy(&comm->commHash_, digest, sizeof(comm->commHash_));
  MSCCLPP_TRY(comm->connect(std::move(bootstrap), role));
  comm->bootstrap_->detachAbortLink();  // set up: from now on only its own abort reaches it
  *out = std::move(comm);
  return Status::kSuccess;
}

Status Communicator::connect(std::unique_ptr<Bootstrap> bootstrap, CommRole role) {
  bootstrap_ = std::move(bootstrap);
  rank_ = bootstrap_->rank();
  nranks_ = bootstrap_->size();
  MSCCLPP_CUDA_TRY(cudaGetDevice(&device_));
  MSCCLPP_TRY(discoverTopology(*bootstrap_, device_, &topology_));
  if (role.policy == PathPolicy::kDecide) {
    HostLayout hosts;
    CommPath path = CommPath::kNative;
    MSCCLPP_TRY(decidePath(&hosts, &path));
    if (path != CommPath::kNative) return connectRouted(hosts, path, role.maxCtas);
  }
  // A layout of one host is one physical host (MSCCLPP_NCCL_HOST_ID only splits), so this is a bug.
  if (!topology_.singleHost)
    return fail(Status::kInternalError, "native path chosen for a communicator over several hosts");
  // Each step's time, for NCCL_DEBUG=INFO: an init's cost is mostly these rounds with the peers.
  using Ms = std::chrono::duration<double, std::milli>;
  auto lap = [last = std::chrono::steady_clock::now()]() mutable {
    const auto now = std::chrono::steady_clock::now();
    return Ms(now - std::exchange(last, now)).count();
  };
  NativeLayout& layout = layout_;
  MSCCLPP_TRY(agreeOnLayout(role, &layout));
  const double layoutMs = lap();
  MSCCLPP_TRY(createScratch(layout));
  const double scratchMs = lap();
  MSCCLPP_TRY(createTransports(layout));
  // Zero-copy on buffers outside windows needs the barrier flags and the chunked kernel to fall back on.
  if (layout.mapsBuffers && hasScratch(kSyncRegion) && hasScratch(kChunkRegion)) {
    MSCCLPP_TRY(MappedAllocations::create(*bootstrap_, topology_, device_, &mapped_));
    transports_.direct.mappedTable = mapped_->deviceTable();
    selector_.setMapsBuffers(true);
  }
  MSCCLPP_TRY(order_.init(readInteger(Param::kGraphMixingSupport) != 0, transports_.packets.steps.ticket));
  const double transportsMs = lap();
  MSCCLPP_TRY(bootstrap_->barrier());
  // From here a peer's death stops this communicator's kernels and shows in asyncError().
  MSCCLPP_TRY(bootstrap_->watchPeers([this](int peer) { onPeerLost(peer); }));
  MSCCLPP_INFO(
      kInit,
      "rank %d/%d commHash 0x%016llx on GPU %d (%d ranks on it): %zu-packet slots, grids up to %d blocks; "
      "layout agreed %.1f ms, scratch mapped %.1f ms, transports %.1f ms, last barrier %.1f ms",
      rank_, nranks_, static_cast<unsigned long long>(commHash_), device_, topology_.ranksOnMyGpu,
      layout.slotPackets, selector_.maxBlocks(), layoutMs, scratchMs, transportsMs, lap());
  return Status::kSuccess;
}

Status Communicator::decidePath(HostLayout* hosts, CommPath* path) {
  // Every rank sees the same table, so all take the same branch without another exchange.
  std::vector<uint64_t> hostIds(nranks_);
  for (int r = 0; r < nranks_; ++r) hostIds[r] = topology_.ranks[r].layoutHostId;
  *hosts = hostLayout(hostIds);
  const FallbackMode mode = fallbackMode();
  const PathChoice choice = choosePath(mode, *hosts);
  MSCCLPP_INFO(kInit, "rank %d/%d: %s path: %s", rank_, nranks_, commPathName(choice.path),
               choice.why.c_str());
  if (choice.path == CommPath::kRefused) return fail(Status::kInvalidUsage, "%s", choice.why.c_str());
  *path = choice.path;
  // GPUs of one host that cannot all reach each other: our transport cannot serve them (natively or
  // inside a hierarchy), stock can. Every rank asks about its own GPU; all follow the whole answer.
  // Ranks that all share their host's one GPU have nothing to ask, and skip the round.
  if (choice.path == CommPath::kAllStock || mode == FallbackMode::kOff || !hostSpansGpus(topology_))
    return Status::kSuccess;
  std::vector<int32_t> reachable(nranks_);
  reachable[rank_] = peerGpusReachable(topology_, rank_, device_) ? 1 : 0;
  MSCCLPP_TRY(bootstrap_->allGather(reachable.data(), sizeof(int32_t)));
  for (int r = 0; r < nranks_; ++r)
    if (!reachable[r]) {
      MSCCLPP_INFO(kInit,
                   "rank %d/%d: all-stock path: the GPU of rank %d cannot reach every other GPU of its host",
                   rank_, nranks_, r);
      *path = CommPath::kAllStock;
      break;
    }
  return Status::kSuccess;
}

Status Communicator::agreeOnLayout(CommRole role, NativeLayout* layout) {
  // Every rank must lay out scratch and cut messages alike: agree on the slot size (the smallest
  // asked for), the grid (the smallest that any rank's share of its GPU allows, transport/block_share.h)
  // and the tuning overrides.
  int maxRanksPerGpu = 1, ranksOfProcess = 0;
  for (int r = 0; r < nranks_; ++r) {
    maxRanksPerGpu = std::max(maxRanksPerGpu, topology_.ranksOnGpuOf(r));
    ranksOfProcess += topology_.sameProcess(rank_, r) && topology_.sameGpu(rank_, r);
  }
  const RankInfo& me = topology_.ranks[rank_];
  preloadKernels(device_);  // before any of our kernels can wait in this process (kernel_preload.h)
  blocks_ = std::make_unique<BlockShare>(device_, me.smCount, topology_.ranksOnMyGpu, ranksOfProcess);
  int proposedGrid = blocks_->proposed();
  // The intra-host part of a routed communicator: the parent's other ranks and stock's kernels run
  // beside ours and must stay resident too (else a rank's stock step waits for SMs that our kernels,
  // waiting for that rank, hold): half of each parent rank's share.
  if (role.policy == PathPolicy::kNativeOnly)
    proposedGrid = std::min(
        proposedGrid, BlockShare::gridWithin(BlockShare::rankShare(me.smCount, role.parentRanksPerGpu) / 2));
  // A caller's maxCTAs bounds every grid, on every rank (grids must match: the smallest proposal wins).
  if (role.maxCtas > 0) proposedGrid = std::min(proposedGrid, role.maxCtas);
  struct Agreement {
    uint64_t slotPackets;
    uint64_t chunkSlotBytes;
    uint64_t tuning;
    uint64_t mapsBuffers;  // MSCCLPP_NCCL_ZERO_COPY: every rank must launch the same kernels
    uint64_t grid;
    uint64_t parkedBlocksHeld;  // zero-copy grids take those blocks too (not under
                                //   MSCCLPP_NCCL_EARLY_LAUNCH=0, nor above any rank's maxCTAs)
  };
  std::vector<Agreement> agreements(nranks_);
  agreements[rank_].grid = static_cast<uint64_t>(proposedGrid);
  MSCCLPP_TRY(bootstrap_->allGather(agreements.data(), sizeof(Agreement)));
  int grid = proposedGrid;
  for (const Agreement& a : agreements) grid = std::min<int>(grid, static_cast<int>(a.grid));
  blocks_->settle(grid);
  selector_.init(topology_.myGpuName, topology_.myGpuArch, nranks_, maxRanksPerGpu, blocks_->grid());
  costModel_ = CostModel(topology_.myGpuName, nranks_, maxRanksPerGpu, 1);
  layout->chunkBlocks = selector_.chunkBlocks();
  agreements.assign(nranks_, Agreement{});
  agreements[rank_] = {
      slotPacketsFor(nranks_),     chunkSlotBytesFor(layout->chunkBlocks, nranks_),
      selector_.fingerprint(),     readInteger(Param::kZeroCopy) != 0 ? 1u : 0u,
      static_cast<uint64_t>(grid), BlockShare::held(grid) > grid && role.maxCtas == 0 ? 1u : 0u};
  MSCCLPP_TRY(bootstrap_->allGather(agreements.data(), sizeof(Agreement)));
  layout->slotPackets = agreements[0].slotPackets;
  layout->chunkSlotBytes = agreements[0].chunkSlotBytes;
  layout->mapsBuffers = nranks_ > 1 && nranks_ <= kMaxZeroCopyRanks;
  bool sameTuning = true, parkedBlocksHeld = true;
  for (const Agreement& a : agreements) {
    layout->mapsBuffers = layout->mapsBuffers && a.mapsBuffers != 0;
    parkedBlocksHeld = parkedBlocksHeld && a.parkedBlocksHeld != 0;
    layout->slotPackets = std::min<size_t>(layout->slotPackets, a.slotPackets);
    layout->chunkSlotBytes = std::min<size_t>(layout->chunkSlotBytes, a.chunkSlotBytes);
    sameTuning = sameTuning && a.tuning == agreements[0].tuning;
  }
  if (!sameTuning) {
    if (rank_ == 0) logWarn("ranks see different MSCCLPP_NCCL_ALGO or tuning tables; all use built-in rules");
    selector_.dropOverrides();
  }
  selector_.setSlotPackets(layout->slotPackets);
  selector_.setChunkSlotBytes(layout->chunkSlotBytes);
  selector_.setParkedBlocksHeld(parkedBlocksHeld);
  // Early launch needs sm_90; it changes no protocol, so ranks need not agree on it.
  int computeMajor = 0;
  MSCCLPP_CUDA_TRY(cudaDeviceGetAttribute(&computeMajor, cudaDevAttrComputeCapabilityMajor, device_));
  // Not inside a routed communicator: its kernels' neighbours on the stream are stock's, whose own launch
  // we do not know to wait before reading what ours wrote.
  selector_.setEarlyLaunch(computeMajor >= 9 && readInteger(Param::kEarlyLaunch) != 0 &&
                           role.policy == PathPolicy::kDecide);
  return Status::kSuccess;
}

Status Communicator::createScratch(const NativeLayout& layout) {
  std::vector<size_t> regions(kRegionCount, 0);
  regions[kPacketRegion] = packetScratchBytes(nranks_, layout.slotPackets);
  if (layout.chunkSlotBytes > 0)
    regions[kChunkRegion] = chunkScratchBytes(layout.chunkBlocks, nranks_, layout.chunkSlotBytes);
  regions[kP2pPacketRegion] = packetScratchBytes(nranks_, layout.slotPackets);
  regions[kP2pAckRegion] = p2pAckBytes(nranks_);
  if (nranks_ <= kMaxChunkRanks)
    regions[kP2pChunkRegion] = chunkScratchBytes(kMaxP2pChunkParts, nranks_, kP2pChunkSlotBytes);
  if (nranks_ <= kMaxZeroCopyRanks)
    regions[kSyncRegion] = signalCountersAt(nranks_) + signalCounterBytes(nranks_);
  return PeerBuffer::create(*bootstrap_, topology_, regions, &scratch_);
}

Status Communicator::createTransports(const NativeLayout& layout) {
  MSCCLPP_CUDA_TRY(cudaHostAlloc(&hostFlags_, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  hostFlags_[0] = 0;
  hostFlags_[1] = kKernelOk;
  int* deviceFlags = nullptr;
  MSCCLPP_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&deviceFlags), hostFlags_, 0));
  const CounterLayout counters(nranks_, layout.chunkBlocks);
  MSCCLPP_CUDA_TRY(cudaMalloc(&deviceCounters_, counters.words * sizeof(uint64_t)));
  MSCCLPP_TRY(zeroDeviceMemory(deviceCounters_, counters.words * sizeof(uint64_t)));

  PacketComm& packets = transports_.packets;
  packets.rank = rank_;
  packets.nranks = nranks_;
  packets.slotPackets = layout.slotPackets;
  packets.steps.value = deviceCounters_ + counters.steps;
  packets.steps.blocksDone = reinterpret_cast<unsigned*>(deviceCounters_ + counters.blocksDone);
  packets.steps.ticket = deviceCounters_ + counters.ticket;
  packets.wait.abortFlag = deviceFlags;
  packets.wait.errorFlag = deviceFlags + 1;
  packets.wait.stopped = reinterpret_cast<int*>(deviceCounters_ + counters.stopped);
  packets.wait.timeoutNs = readNanoseconds(Param::kWaitTimeout);
  packets.wait.rank = rank_;
  MSCCLPP_TRY(StallWatch::create(rank_, nranks_, commHash_, &stallWatch_));
  if (stallWatch_) {
    packets.wait.stallNs = stallWatch_->stallNs();
    packets.wait.stall = stallWatch_->deviceReport();
  }
  ZeroCopyComm& direct = transports_.direct;
  direct.rank = rank_;
  direct.nranks = nranks_;
  direct.calls = deviceCounters_ + counters.calls;
  direct.wait = packets.wait;
  direct.oneGpu = topology_.oneGpu();
  return bindScratch(layout);
}

Status Communicator::bindScratch(const NativeLayout& layout) {
  const CounterLayout counters(nranks_, layout.chunkBlocks);
  const PeerBuffer& scratch = *scratch_;
  transports_.packets.localScratch = scratch.local(kPacketRegion);
  transports_.packets.peerScratch = scratch.devicePeerTable(kPacketRegion);
  P2pComm& p2p = transports_.p2p;
  p2p.packets = transports_.packets;
  p2p.packets.localScratch = scratch.local(kP2pPacketRegion);
  p2p.packets.peerScratch = scratch.devicePeerTable(kP2pPacketRegion);
  p2p.localAcks = scratch.local(kP2pAckRegion);
  p2p.peerAcks = scratch.devicePeerTable(kP2pAckRegion);
  p2p.sendSteps = deviceCounters_ + counters.p2pSend;
  p2p.recvSteps = deviceCounters_ + counters.p2pRecv;
  const WaitControl& wait = transports_.packets.wait;
  transports_.chunks = chunkComm(layout.chunkBlocks, layout.chunkSlotBytes, kChunkRegion,
                                 deviceCounters_ + counters.chunks, wait);
  transports_.p2pChunks = chunkComm(kMaxP2pChunkParts, kP2pChunkSlotBytes, kP2pChunkRegion,
                                    deviceCounters_ + counters.p2pChunks, wait);
  if (scratch.has(kSyncRegion)) {
    transports_.direct.localFlags = static_cast<uint64_t*>(scratch.local(kSyncRegion));
    transports_.direct.peerFlags = reinterpret_cast<uint64_t* const*>(scratch.devicePeerTable(kSyncRegion));
    const size_t at = signalCountersAt(nranks_);
    std::vector<uint64_t*> peers(nranks_);
    for (int r = 0; r < nranks_; ++r)
      peers[r] = reinterpret_cast<uint64_t*>(static_cast<char*>(scratch.peer(kSyncRegion, r)) + at);
    oneSided_.bind(rank_, std::move(peers),
                   reinterpret_cast<uint64_t*>(static_cast<char*>(scratch.local(kSyncRegion)) + at));
  }
  return Status::kSuccess;
}

Status Communicator::connectRouted(const HostLayout& layout, CommPath path, int maxCtas) {
  std::unique_ptr<Communicator> intra;
  if (path == CommPath::kHierarchical) {
    int ranksPerGpu = 1;
    for (int r = 0; r < nranks_; ++r) ranksPerGpu = std::max(ranksPerGpu, topology_.ranksOnGpuOf(r));
    MSCCLPP_TRY(joinNewCommunicator(layout.intraMembers(rank_), &intra,
                                    {PathPolicy::kNativeOnly, ranksPerGpu, maxCtas}));
    intra_ = intra.get();
  }
  MSCCLPP_TRY(RoutedComm::create(*bootstrap_, topology_, layout, path, std::move(intra), maxCtas, &routed_));
  costModel_ = CostModel(topology_.myGpuName, nranks_, 1, layout.nhosts());
  // Routed work publishes no tickets: each call's end is the `done` event (native/stream_order.h).
  MSCCLPP_TRY(order_.init(readInteger(Param::kGraphMixingSupport) != 0, nullptr));
  MSCCLPP_TRY(bootstrap_->barrier());
  MSCCLPP_TRY(bootstrap_->watchPeers([this](int peer) { onPeerLost(peer); }));
  return Status::kSuccess;
}

size_t Communicator::releasableBytes() const { return !routed_ && scratch_ ? scratch_->deviceBytes() : 0; }

size_t Communicator::deviceBytes() const {
  if (routed_) return routed_->deviceBytes();
  const size_t counters =
      deviceCounters_ ? CounterLayout(nranks_, layout_.chunkBlocks).words * sizeof(uint64_t) : 0;
  return releasableBytes() + counters + (mapped_ ? mapped_->deviceBytes() : 0);
}

Status Communicator::suspend() {
  if (suspended_) return fail(Status::kInvalidUsage, "ncclCommSuspend: comm is suspended already");
  if (routed_)
    return fail(
        Status::kInvalidUsage,
        "ncclCommSuspend: not supported on a communicator that goes through stock NCCL (several hosts, "
        "or MSCCLPP_NCCL_FALLBACK)");
  if (order_.everCaptured())
    return fail(Status::kInvalidUsage,
                "ncclCommSuspend: a CUDA graph captured calls of this comm, and its replays would use the "
                "scratch that suspend frees");
  MSCCLPP_TRY(order_.markIssuedWork());
  MSCCLPP_TRY(order_.waitIssuedWork());
  MSCCLPP_TRY(bootstrap_->barrier());  // no peer's kernel uses our scratch any more
  releaseScratch();
  suspended_ = true;
  // Every peer closed its mapping of our scratch: its memory is back with the driver.
  return bootstrap_->barrier();
}

Status Communicator::resume() {
  if (!suspended_) return fail(Status::kInvalidUsage, "ncclCommResume: comm is not suspended");
  MSCCLPP_TRY(createScratch(layout_));
  // Packet steps, chunk channels, p2p and zero-copy call counts start again with the zeroed scratch; the stop
  // word and the ticket (last) keep their values.
  const CounterLayout counters(nranks_, layout_.chunkBlocks);
  MSCCLPP_TRY(zeroDeviceMemory(deviceCounters_, counters.stopped * sizeof(uint64_t)));
  MSCCLPP_TRY(bindScratch(layout_));
  // No rank's kernel writes a peer's scratch before that peer restarted its counters.
  MSCCLPP_TRY(bootstrap_->barrier());
  suspended_ = false;
  return Status::kSuccess;
}

void Communicator::releaseScratch() {
  scratch_.reset();
  cudaGetLastError();
}

ChunkComm Communicator::chunkComm(int blocks, size_t slotBytes, int region, uint64_t* counters,
                                  const WaitControl& wait) const {
  ChunkComm chunks{};
  chunks.rank = rank_;
  chunks.nranks = nranks_;
  chunks.blocks = blocks;
  chunks.slotBytes = slotBytes;
  chunks.wait = wait;
  chunks.oneGpu = topology_.oneGpu();
  chunks.sent = counters;
  chunks.received = counters + static_cast<size_t>(blocks) * nranks_;
  if (hasScratch(region)) {
    chunks.localScratch = static_cast<char*>(scratch_->local(region));
    chunks.peerScratch = reinterpret_cast<char* const*>(scratch_->devicePeerTable(region));
  }
  return chunks;
}

Communicator::~Communicator() {
  using Ms = std::chrono::duration<double, std::milli>;
  const auto start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return Ms(std::chrono::steady_clock::now() - t).count();
  };
  const bool stopped = hostFlags_ && const_cast<volatile int*>(hostFlags_)[0];
  // The helper that maps peers' allocations uses the bootstrap: it ends first.
  if (mapped_) mapped_->stop();
  // Then the bootstrap (goodbye to the peers unless aborted, then its receiver thread ends), so
  // that the peer-lost handler can no longer touch what is freed below.
  bootstrap_.reset();
  const double bootstrapMs = since(start);
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(device_);
  // The frees below would wait for the device anyway; waiting here first shows how long queued
  // kernels took to leave.
  auto phase = std::chrono::steady_clock::now();
  // Stock kernels of a routed communicator that wait for a lost rank would never drain: stock's abort
  // stops them, as it does for stock NCCL's own users.
  if (routed_ && (stopped || lostRank_.load() >= 0)) routed_->abort();
  cudaDeviceSynchronize();
  const double drainMs = since(phase);
  phase = std::chrono::steady_clock::now();
  windows_.clear();
  mapped_.reset();
  routed_.reset();
  releaseScratch();
  const double unmapMs = since(phase);
  phase = std::chrono::steady_clock::now();
  if (deviceCounters_) cudaFree(deviceCounters_);
  if (hostFlags_) cudaFreeHost(hostFlags_);
  cudaGetLastError();
  if (previous >= 0) cudaSetDevice(previous);
  MSCCLPP_INFO(kInit,
               "rank %d: teardown%s took %.1f ms: bootstrap closed %.1f ms, kernels drained %.1f ms, peer "
               "buffers unmapped %.1f ms, device memory freed %.1f ms",
               rank_, stopped ? " (aborted)" : "", since(start), bootstrapMs, drainMs, unmapMs, since(phase));
}

Status Communicator::allReduce(const AllReduceArgs& args, cudaStream_t stream) {
  if (routed_) {
    order_.newWork();  // no ticket is published: the call's end is recorded as an event
    return routed_->allReduce(args, stream);
  }
  AllReduceArgs call = args;
  call.ticket = order_.newWork();
  if (args.count == 0) return Status::kSuccess;
  const size_t bytes = args.count * dataTypeSize(args.type);
  numberCall(Collective::kAllReduce, bytes);
  if (nranks_ == 1 && !args.op.scaling.preMultiply) {
    // A single rank's reduction is its input (Avg divides by one).
    if (args.recv != args.send)
      MSCCLPP_CUDA_TRY(cudaMemcpyAsync(args.recv, args.send, bytes, cudaMemcpyDeviceToDevice, stream));
    return Status::kSuccess;
  }
  DirectBuffers windows;
  const bool inWindows = findDirectBuffers(args.send, bytes, args.recv, bytes, &windows);
  // Every rank reaches the same plan (windows are collective, the rest is the call's shape).
  const CallPlan plan = selector_.plan(allReduceShape(args, inWindows));
  bool capturing = false;
  const MappedCall mapped = plan.mapped
                                ? describeBuffers(args.send, bytes, args.recv, bytes, call.ticket, &capturing)
                                : MappedCall{};
  uint64_t published = 0;
  MSCCLPP_TRY(runAllReduce(transports_, plan, call, inWindows ? &windows : nullptr,
                           plan.mapped ? &mapped : nullptr, stream, &published));
  if (plan.mapped && !capturing) mapped_->markUsed(stream);
  order_.published(published);
  return Status::kSuccess;
}

MappedCall Communicator::describeBuffers(const void* send, size_t sendBytes, const void* recv,
                                         size_t recvBytes, uint64_t ticket, bool* capturing) {
  // A captured description is replayed for the graph's life: there, wait for the peers' mappings.
  *capturing = order_.capturing();
  const double wait = *capturing ? readSeconds(Param::kZeroCopyCaptureWait) : 0.0;
  MappedCall mapped{};
  mapped.send.ready = mapped.recv.ready = 1;  // what peers never touch needs no mapping
  if (send) mapped_->describe(send, sendBytes, ticket, *capturing, wait, &mapped.send);
  if (recv) mapped_->describe(recv, recvBytes, ticket, *capturing, wait, &mapped.recv);
  return mapped;
}

void Communicator::registerBuffer(const void* buffer, size_t bytes) {
  if (routed_) {
    if (intra_) intra_->registerBuffer(buffer, bytes);
    return;
  }
  if (mapped_ && bytes > 0) mapped_->registerBuffer(buffer, bytes);
}

void Communicator::unregisterBuffer(const void* buffer, size_t bytes) {
  if (routed_) {
    if (intra_) intra_->unregisterBuffer(buffer, bytes);
    return;
  }
  if (mapped_) mapped_->unregisterBuffer(buffer, bytes);
}

Status Communicator::registerWindow(void* buffer, size_t bytes, bool symmetric, SymmetricWindow** out) {
  // Over several hosts a window is the intra-host communicator's: its steps of a plan go zero-copy there.
  if (routed_) {
    if (intra_ == nullptr)
      return fail(
          Status::kInvalidUsage,
          "windows are not supported on a communicator that runs all on stock NCCL "
          "(MSCCLPP_NCCL_FALLBACK=all, hosts of unequal size or of one rank, or GPUs without peer access)");
    return intra_->registerWindow(buffer, bytes, symmetric, out);
  }
  std::unique_ptr<SymmetricWindow> window;
  MSCCLPP_TRY(SymmetricWindow::create(*bootstrap_, topology_, buffer, bytes,
                                      symmetric && hasScratch(kSyncRegion), &window));
  std::lock_guard<std::mutex> lock(windowsMutex_);
  *out = window.get();
  windows_.push_back(std::move(window));
  return Status::kSuccess;
}

bool Communicator::hostIsLoadStoreTeam() const {
  // All on stock NCCL, no window maps a peer.
  return intra_ != nullptr && routed_->layout().hostsAreTeams();
}

int Communicator::loadStoreRank(int rank) const {
  if (!routed_) return rank;
  if (!hostIsLoadStoreTeam()) return rank == rank_ ? 0 : -1;
  const HostLayout& layout = routed_->layout();
  return layout.hostOf[rank] == layout.hostOf[rank_] ? layout.localRankOf[rank] : -1;
}

int Communicator::loadStoreSize() const {
  if (!routed_) return nranks_;
  return hostIsLoadStoreTeam() ? routed_->layout().localSize(rank_) : 1;
}

Status Communicator::deregisterWindow(SymmetricWindow* window) {
  if (routed_ && intra_) return intra_->deregisterWindow(window);
  std::unique_ptr<SymmetricWindow> owned;
  {
    std::lock_guard<std::mutex> lock(windowsMutex_);
    auto it =
        std::find_if(windows_.begin(), windows_.end(), [&](const auto& w) { return w.get() == window; });
    if (it == windows_.end()) return fail(Status::kInvalidArgument, "not a window of this communicator");
    owned = std::move(*it);
    windows_.erase(it);
  }
  if (owned->mapped()) MSCCLPP_CUDA_TRY(cudaDeviceSynchronize());
  return Status::kSuccess;
}

bool Communicator::findDirectBuffers(const void* send, size_t sendBytes, const void* recv, size_t recvBytes,
                                     DirectBuffers* out) const {
  std::lock_guard<std::mutex> lock(windowsMutex_);
  auto find = [&](const void* ptr, size_t bytes, PeerBuffers* buffers) {
    for (const auto& window : windows_) {
      if (!window->mapped() || !window->contains(ptr, bytes)) continue;
      buffers->bases = window->devicePeerTable();
      buffers->offset = static_cast<const char*>(ptr) - static_cast<const char*>(window->local());
      return true;
    }
    return false;
  };
  return find(send, sendBytes, &out->send) && find(recv, recvBytes, &out->recv);
}

Status Communicator::exchange(const ExchangeArgs& args, cudaStream_t stream) {
  if (routed_) {
    order_.newWork();
    return routed_->exchange(args, stream);
  }
  const Collective collective = args.collective;
  ExchangeArgs call = args;
  call.ticket = order_.newWork();
  if (args.rangeBytes == 0) return Status::kSuccess;
  numberCall(collective, args.rangeBytes);
  // Every rank reaches the same plan: it depends on the call's shape only.
  const CallPlan plan = selector_.plan(exchangeShape(args));
  bool capturing = false;
  MappedCall mapped{};
  // The extents of this rank's buffers that the call touches.
  const size_t srcBytes = args.srcStride * (nranks_ - 1) + args.rangeBytes;
  const size_t dstBytes = args.dstStride * (nranks_ - 1) + args.rangeBytes;
  DirectBuffers windows;
  const bool inWindows = plan.mapped && exchangeMayUseWindows(call, srcBytes, dstBytes) &&
                         findDirectBuffers(args.src, srcBytes, args.dst, dstBytes, &windows);
  if (plan.mapped && !inWindows) {
    // What the peers read or write of this rank's buffers (exchange.h: mappedFlow).
    mapped = describeBuffers(peersReadSource(call, rank_) ? args.src : nullptr, srcBytes,
                             peersWriteDestination(call, rank_) ? args.dst : nullptr, dstBytes, call.ticket,
                             &capturing);
    if (overwritesPeersSource(call, srcBytes, dstBytes)) mapped.send.ready = 0;  // every rank goes to scratch
  }
  uint64_t published = 0;
  MSCCLPP_TRY(runExchange(transports_, plan, call, plan.mapped ? &mapped : nullptr,
                          inWindows ? &windows : nullptr, stream, &published));
  if (plan.mapped && !inWindows && !capturing) mapped_->markUsed(stream);
  order_.published(published);
  return Status::kSuccess;
}

Status Communicator::sendRecv(const std::vector<P2pOp>& ops, cudaStream_t stream) {
  const uint64_t ticket = order_.newWork();
  for (const P2pOp& op : ops)
    if (op.peer < 0 || op.peer >= nranks_)
      return fail(Status::kInvalidArgument, "peer %d is not a rank of this communicator", op.peer);
  if (routed_) return routed_->sendRecv(ops, stream);  // a routed communicator hands out no tickets
  size_t bytes = 0;
  for (const P2pOp& op : ops) bytes += op.bytes;
  numberCall(Collective::kSendRecv, bytes);
  // Large sends on chunks offer their buffer for the receiver to pull (p2p.h), described here.
  struct Offers final : SendSources {
    Offers(Communicator* comm, uint64_t ticket) : comm(comm), ticket(ticket) {}
    MappedBuffer describe(const P2pOp& send) override {
      const MappedBuffer source =
          comm->describeBuffers(send.buffer, send.bytes, nullptr, 0, ticket, &capturing).send;
      anyReady = anyReady || source.ready;
      return source;
    }
    Communicator* comm;
    uint64_t ticket;
    bool capturing = false, anyReady = false;
  } offers(this, ticket);
  uint64_t published = 0;
  MSCCLPP_TRY(runSendRecv(transports_, selector_, ops, ticket, stream, &offers, &published));
  if (offers.anyReady && !offers.capturing) mapped_->markUsed(stream);
  order_.published(published);
  return Status::kSuccess;
}

CostPath Communicator::modeledPath(const CallShape& call) const {
  // A routed call's steps between hosts run on stock's simple protocol, which moves chunks.
  return routed_ ? CostPath::kChunked : selector_.costPath(call);
}

double Communicator::modeledMicroseconds(const AllReduceArgs& args) const {
  const CallShape call = allReduceShape(args, false);  // a call in windows runs zero-copy, as a mapped one
  if (call.bytes == 0 || nranks_ == 1) return 0;
  return costModel_.collectiveMicroseconds(Collective::kAllReduce, call.bytes, modeledPath(call));
}

double Communicator::modeledMicroseconds(const ExchangeArgs& args) const {
  if (args.rangeBytes == 0 || nranks_ == 1) return 0;
  return costModel_.collectiveMicroseconds(args.collective, args.rangeBytes,
                                           modeledPath(exchangeShape(args)));
}

double Communicator::modeledMicroseconds(const std::vector<P2pOp>& ops) const {
  size_t sent = 0, received = 0, largest = 0;
  for (const P2pOp& op : ops) {
    (op.isSend ? sent : received) += op.bytes;
    largest = std::max(largest, op.bytes);
  }
  if (largest == 0) return 0;
  return costModel_.transfersMicroseconds(sent, received,
                                          modeledPath({Collective::kSendRecv, 1, largest, false, false}));
}

void Communicator::numberCall(Collective collective, size_t bytes) {
  numberCall(collectiveName(collective), bytes);
}

void Communicator::numberCall(const char* what, size_t bytes) {
  if (!stallWatch_) return;
  const uint64_t number = stallWatch_->beginCall(what, bytes);
  for (WaitControl* wait : {&transports_.packets.wait, &transports_.p2p.packets.wait,
                            &transports_.chunks.wait, &transports_.p2pChunks.wait, &transports_.direct.wait})
    wait->call = number;
}

Status Communicator::oneSidedRefusal(const char* what) const {
  if (routed_)
    return fail(Status::kInvalidUsage, "%s: not supported on a communicator that goes through stock NCCL",
                what);
  if (!hasScratch(kSyncRegion))
    return fail(Status::kInvalidUsage, "%s: not supported past %d ranks", what, kMaxZeroCopyRanks);
  if (order_.capturing())  // the shim refuses captures first; this keeps the native rule whole
    return fail(Status::kInvalidUsage, "%s: not supported inside CUDA graph capture (nor in NCCL)", what);
  return Status::kSuccess;
}

Status Communicator::putSignal(const void* src, size_t bytes, int peer, const SymmetricWindow& window,
                               size_t offset, cudaStream_t stream) {
  order_.newWork();  // no ticket: the call's end is recorded as an event
  MSCCLPP_TRY(oneSidedRefusal("ncclPutSignal"));
  if (!window.mapped())
    return fail(
        Status::kInvalidUsage,
        "ncclPutSignal: the peer's window is not mapped here (register it with NCCL_WIN_COLL_SYMMETRIC)");
  // Every rank's window holds sharedBytes(): the peer's may be smaller than this rank's.
  if (offset > window.sharedBytes() || bytes > window.sharedBytes() - offset)
    return fail(Status::kInvalidArgument,
                "ncclPutSignal: %zu bytes at offset %zu pass the end of the smallest rank's window (%zu "
                "bytes)",
                bytes, offset, window.sharedBytes());
  numberCall("PutSignal", bytes);
  return oneSided_.put(src, window.peerBase(peer) + offset, bytes, peer, stream);
}

Status Communicator::signal(int peer, cudaStream_t stream) {
  order_.newWork();
  MSCCLPP_TRY(oneSidedRefusal("ncclSignal"));
  numberCall("Signal", 0);
  return oneSided_.signal(peer, stream);
}

Status Communicator::waitSignals(const std::vector<uint64_t>& counts, cudaStream_t stream) {
  order_.newWork();
  MSCCLPP_TRY(oneSidedRefusal("ncclWaitSignal"));
  numberCall("WaitSignal", 0);
  return oneSided_.wait(counts, transports_.packets.wait, stream);
}

Status Communicator::asyncError() const {
  const int lost = lostRank_.load();
  if (lost >= 0)
    return fail(Status::kRemoteError,
                "rank %d is gone: its process exited or crashed without finalizing the communicator (or it "
                "called ncclCommAbort)",
                lost);
  if (routed_) return routed_->asyncError();
  switch (const_cast<volatile int*>(hostFlags_)[1]) {
    case kKernelOk:
      return Status::kSuccess;
    case kKernelAborted:
      return fail(Status::kRemoteError, "communicator was aborted while a kernel waited for a peer");
    // The user's contract broken (every rank must make the same calls with the same counts): invalid
    // usage, as NCCL calls inconsistent arguments. Nothing was moved.
    case kKernelCallsDiffer:
      return fail(Status::kInvalidUsage,
                  "ranks called a collective with different counts (or other collectives or roots): every "
                  "rank must make the same calls with the same counts");
    // This rank's arguments were fine; what a peer posted was not (or its mapping here is stale): a
    // remote error, which users answer as for a lost peer, by aborting the communicator.
    case kKernelBadPeerData:
      return fail(Status::kRemoteError,
                  "a peer posted a zero-copy buffer outside the allocation mapped for it here; the call was "
                  "refused without touching it");
    default:
      return fail(Status::kTimeout,
                  "a kernel waited for a peer without progress for MSCCLPP_NCCL_WAIT_TIMEOUT seconds");
  }
}

void Communicator::onPeerLost(int peer) {
  int none = -1;
  if (lostRank_.compare_exchange_strong(none, peer))
    logWarn("rank %d: rank %d is gone (its process exited or crashed, or it aborted); stopping the kernels",
            rank_, peer);
  stopKernels();
}

void Communicator::stopKernels() {
  if (hostFlags_) const_cast<volatile int*>(hostFlags_)[0] = 1;
  // Our intra-host kernels only: this also runs on the bootstrap's receiver thread, where no CUDA call
  // (so no stock ncclCommAbort) may be made. Stock kernels that wait for a lost rank stop when this
  // communicator is aborted or destroyed (the destructor aborts the stock ones after a peer loss).
  if (routed_) routed_->stopKernels();
}

void Communicator::abortOutstandingWork() {
  stopKernels();
  if (routed_) routed_->abort();  // its intra-host communicator and stock's; ours stays for the shrink
}

Status Communicator::revoke() {
  abortOutstandingWork();
  return order_.markIssuedWork();
}

void Communicator::abort() {
  stopKernels();
  childSetups_.raise();  // a split or shrink in another thread leaves its child's rendezvous
  if (bootstrap_) bootstrap_->abort();
  if (routed_) routed_->abort();
}

Status Communicator::joinNewCommunicator(const std::vector<int>& members, std::unique_ptr<Communicator>* out,
                                         CommRole role) {
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  UniqueId id;
  if (newRank == 0) {
    MSCCLPP_TRY(bootstrapCreateUniqueId(&id, /*ignoreCommIdEnv=*/true));
    for (size_t i = 1; i < members.size(); ++i)
      MSCCLPP_TRY(bootstrap_->send(members[i], kShareIdTag, &id, sizeof(id)));
  } else {
    MSCCLPP_TRY(bootstrap_->recv(members[0], kShareIdTag, &id, sizeof(id)));
  }
  return create(id, newRank, static_cast<int>(members.size()), out, &childSetups_, role);
}

Status Communicator::split(int color, int key, int maxCtas, std::unique_ptr<Communicator>* out) {
  struct Choice {
    int color;
    int key;
  };
  std::vector<Choice> choices(nranks_);
  choices[rank_] = {color, key};
  MSCCLPP_TRY(bootstrap_->allGather(choices.data(), sizeof(Choice)));
  out->reset();
  // The child's blocks come out of the parent's, on every parent rank alike (all of them split between
  // the same two of the parent's calls), so that both keep their peers resident (transport/block_share.h).
  if (blocks_) selector_.setResidentBlocks(blocks_->halve());
  if (color == kSplitNoColor) return Status::kSuccess;
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (choices[r].color == color) members.push_back(r);
  // New ranks follow the keys; equal keys keep the parent's order.
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return choices[a].key < choices[b].key; });
  CommRole role;
  role.maxCtas = maxCtas;
  return joinNewCommunicator(members, out, role);
}

Status Communicator::shareGrowId(const UniqueId* mine, UniqueId* out) {
  struct Offer {
    int32_t has;
    UniqueId id;
  };
  std::vector<Offer> offers(nranks_);
  memset(offers.data(), 0, sizeof(Offer) * offers.size());  // padding included: the bytes are sent
  if (mine != nullptr) {
    offers[rank_].has = 1;
    offers[rank_].id = *mine;
  }
  MSCCLPP_TRY(bootstrap_->allGather(offers.data(), sizeof(Offer)));
  const Offer* chosen = nullptr;
  for (const Offer& offer : offers) {
    if (!offer.has) continue;
    if (chosen != nullptr && memcmp(&chosen->id, &offer.id, sizeof(UniqueId)) != 0)
      return fail(Status::kInvalidUsage,
                  "ncclCommGrow: existing ranks passed different ids: the root passes the id of its "
                  "ncclCommGetUniqueId, the others NULL or the same id");
    chosen = &offer;
  }
  if (chosen == nullptr)
    return fail(Status::kInvalidUsage,
                "ncclCommGrow: no existing rank passed an id: the root passes the id of its "
                "ncclCommGetUniqueId");
  *out = chosen->id;
  return Status::kSuccess;
}

Status Communicator::shrink(const std::vector<int>& excluded, int maxCtas,
                            std::unique_ptr<Communicator>* out) {
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (std::find(excluded.begin(), excluded.end(), r) == excluded.end()) members.push_back(r);
  CommRole role;
  role.maxCtas = maxCtas;
  return joinNewCommunicator(members, out, role);
}

}  // namespace mscclpp_nccl
