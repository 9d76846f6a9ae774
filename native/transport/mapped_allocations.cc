#include "native/transport/mapped_allocations.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "native/common/logging.h"
#include "native/common/threads.h"
#include "native/transport/cuda_check.h"
#include "native/transport/cuda_driver.h"
#include "native/transport/descriptor_server.h"
#include "native/transport/device_memory.h"
#include "native/transport/setup_copy.h"

namespace mscclpp_nccl {

constexpr int kAllocationTag = 0x5ef0;

// How peers in other processes map an allocation (AllocationKey::sharing).
enum Sharing : uint32_t { kCudaIpc = 1, kDescriptor = 2 };

// One bootstrap message of this protocol.
struct AllocationMessage {
  enum Kind : uint32_t { kExport = 1, kRetire = 2, kAck = 3 };
  uint32_t kind;
  uint32_t generation;
  uint16_t index;
  uint16_t pieces;   // kExport of a run (AllocationKey::pieces): how many RunPieceOffer follow
  uint32_t sharing;  // kExport: Sharing
  uint64_t base;     // kExport: the allocation's start in the owner's process (for ranks in that process)
  uint64_t bytes;    // kExport: its size
  cudaIpcMemHandle_t handle;  // kExport, kCudaIpc: for ranks in other processes
  DescriptorOffer offer;      // kExport, kDescriptor: where ranks in other processes fetch its descriptor
};

// Follows a run's export, one per piece in address order: its size and the token of its descriptor's
// offer (the server is the message's).
struct RunPieceOffer {
  uint64_t bytes;
  uint64_t token;
};

namespace {

constexpr double kServePollSeconds = 0.1;
// How often the helper looks for freed allocations: freed memory returns to the driver within about this.
constexpr double kFreedCheckSeconds = 0.25;
// How long a peer may take to hand over a descriptor it offered (its server is a thread of its own).
constexpr double kFetchSeconds = 10.0;
// ncclMemAlloc memory smaller than this waits for its first mapped call (calls map buffers of 256 KB and
// up; small allocations would only crowd the peers' tables).
constexpr size_t kOfferMinBytes = 1 << 20;
// A buffer over more allocations than this stays on scratch (PyTorch's expandable segments map 20 MB
// chunks: 5 GB).
constexpr size_t kMaxRunPieces = 256;

// The allocations of a key, in address order: a run's pieces, or the single allocation.
std::vector<AllocationPiece> piecesOf(const AllocationKey& key) {
  return key.pieces.empty() ? std::vector<AllocationPiece>{{key.bufferId, key.bytes}} : key.pieces;
}

// CUDA's id of the allocation at `address` (0: none), unique for the process's life; quiet, since the
// helper asks it of freed memory.
uint64_t bufferIdAt(const CudaDriver* driver, uintptr_t address) {
  unsigned long long id = 0;  // NOLINT(runtime/int): the attribute's documented type
  if (driver->cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, static_cast<CUdeviceptr>(address)) !=
      CUDA_SUCCESS)
    return 0;
  return id;
}

// Withdraws the descriptor offers of one export (an index's allocation that is gone or superseded).
void withdrawOffers(const std::vector<uint64_t>& tokens) {
  for (uint64_t token : tokens) withdrawDescriptor(token);
}

// A run's identity: made of its pieces' ids, which CUDA never reuses, and apart from every allocation's
// own id (those count up from 1).
uint64_t runId(const std::vector<AllocationPiece>& pieces) {
  uint64_t hash = 1469598103934665603ull;
  for (const AllocationPiece& piece : pieces) hash = (hash ^ piece.bufferId) * 1099511628211ull;
  return hash | (1ull << 63);
}

// Extends `key`, a cuMem allocation, over the allocations mapped right after it until it reaches `end`:
// a tensor of PyTorch's expandable segments crosses the chunks that the segment maps side by side. Two
// driver queries a piece, on every call that uses the run: a piece that cannot be exported shows when it
// is (the peers never acknowledge it, and the run stays on scratch).
bool extendOverRun(const CudaDriver* driver, uintptr_t end, AllocationKey* key) {
  key->pieces = {{key->bufferId, key->bytes}};
  uintptr_t next = key->base + key->bytes;
  while (next < end) {
    CUdeviceptr base = 0;
    size_t size = 0;
    const uint64_t id = bufferIdAt(driver, next);
    if (key->pieces.size() == kMaxRunPieces || id == 0 ||
        driver->cuMemGetAddressRange(&base, &size, static_cast<CUdeviceptr>(next)) != CUDA_SUCCESS ||
        static_cast<uintptr_t>(base) != next || size == 0)
      return false;
    key->pieces.push_back({id, size});
    next += size;
  }
  key->bytes = next - key->base;
  key->bufferId = runId(key->pieces);
  return true;
}

// The communicators of this process that map buffers, for ncclMemAlloc's offers. An offer runs under the
// lock, and a communicator leaves the list before its helper stops, so none is offered to as it goes.
struct LiveMappings {
  std::mutex mu;
  std::vector<MappedAllocations*> all;
};
LiveMappings& liveMappings() {
  static LiveMappings* live = new LiveMappings();  // never destroyed: used at exit
  return *live;
}

// Lets this thread make the CUDA calls that stream capture in global mode forbids (mapping memory,
// copying to a stream that is not captured); they touch no captured stream. Restores the mode after.
class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// Maps an exported allocation, once per process: two communicators of this process may map the same
// peer allocation, and CUDA may refuse a second open of one handle in a context.
class ProcessMappings {
 public:
  static ProcessMappings& get() {
    static ProcessMappings* mappings = new ProcessMappings();  // never destroyed: used at exit
    return *mappings;
  }
  void* open(const cudaIpcMemHandle_t& handle) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key(handle.reserved, sizeof(handle.reserved));
    auto it = byHandle_.find(key);
    if (it != byHandle_.end()) {
      ++it->second.references;
      return it->second.mapping;
    }
    void* mapping = nullptr;
    if (cudaIpcOpenMemHandle(&mapping, handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    byHandle_[key] = {mapping, 1};
    return mapping;
  }
  void close(void* mapping) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = byHandle_.begin(); it != byHandle_.end(); ++it)
      if (it->second.mapping == mapping) {
        if (--it->second.references == 0) {
          cudaIpcCloseMemHandle(mapping);
          byHandle_.erase(it);
        }
        return;
      }
  }

 private:
  struct Mapping {
    void* mapping;
    int references;
  };
  std::mutex mu_;
  std::map<std::string, Mapping> byHandle_;
};

}  // namespace

MappedAllocations::MappedAllocations(Bootstrap& bootstrap, const Topology& topology, int device)
    : bootstrap_(bootstrap),
      topology_(topology),
      device_(device),
      rank_(bootstrap.rank()),
      nranks_(bootstrap.size()),
      ackGeneration_(kMaxMappedAllocations, 0),
      acks_(kMaxMappedAllocations, 0),
      offers_(kMaxMappedAllocations),
      peerSlots_(bootstrap.size(), std::vector<Slot>(kMaxMappedAllocations)) {}

Status MappedAllocations::create(Bootstrap& bootstrap, const Topology& topology, int device,
                                 std::unique_ptr<MappedAllocations>* out) {
  std::unique_ptr<MappedAllocations> self(new MappedAllocations(bootstrap, topology, device));
  // Descriptor passing checks that the fetching process is the one its rank runs in.
  std::vector<int32_t> pids(self->nranks_, 0);
  pids[self->rank_] = static_cast<int32_t>(getpid());
  MSCCLPP_TRY(bootstrap.allGather(pids.data(), sizeof(int32_t)));
  for (int peer = 0; peer < self->nranks_; ++peer)
    if (!topology.sameProcess(self->rank_, peer) &&
        std::find(self->remotePids_.begin(), self->remotePids_.end(), pids[peer]) == self->remotePids_.end())
      self->remotePids_.push_back(pids[peer]);
  const size_t tableBytes = sizeof(MappedRegion) * kMaxMappedAllocations * self->nranks_;
  MSCCLPP_CUDA_TRY(cudaMalloc(&self->deviceTable_, tableBytes));
  MSCCLPP_TRY(zeroDeviceMemory(self->deviceTable_, tableBytes));
  MSCCLPP_CUDA_TRY(cudaStreamCreateWithFlags(&self->copyStream_, cudaStreamNonBlocking));
  MSCCLPP_CUDA_TRY(cudaEventCreateWithFlags(&self->lastUse_, cudaEventDisableTiming));
  MSCCLPP_CUDA_TRY(cudaHostAlloc(&self->hostStaging_, sizeof(MappedRegion), cudaHostAllocPortable));
  MappedAllocations* raw = self.get();
  MSCCLPP_TRY(startThread(&self->helper_, [raw] { raw->serve(); }, "zero-copy mappings", "ZeroCopy"));
  {
    std::lock_guard<std::mutex> lock(liveMappings().mu);
    liveMappings().all.push_back(raw);
  }
  *out = std::move(self);
  return Status::kSuccess;
}

void MappedAllocations::offerToAll(const void* ptr, size_t bytes) {
  int device = -1;
  if (ptr == nullptr || bytes < kOfferMinBytes) return;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  // The caller may be capturing a graph in global mode: these driver calls touch none of its streams.
  RelaxedCapture relaxed;
  AllocationKey key;
  const char* why = nullptr;
  if (!identify(ptr, bytes, &key, &why)) return;  // its first call says why, once
  std::lock_guard<std::mutex> lock(liveMappings().mu);
  for (MappedAllocations* mappings : liveMappings().all)
    if (mappings->device_ == device) mappings->offer(key);
}

void MappedAllocations::offer(const AllocationKey& key) {
  std::unique_lock<std::mutex> lock(mu_);
  // Never retires another allocation for room: that waits for this rank's latest mapped call, which
  // ncclMemAlloc must not (its first call exports it instead).
  if (stopping_ || registry_.wouldEvict(key)) return;
  uint16_t index = 0;
  use(key, 0, RegistryUse::kCall, &lock, &index);  // call 0: the first to go for room later
}

void MappedAllocations::stop() {
  {
    std::lock_guard<std::mutex> lock(liveMappings().mu);
    auto& all = liveMappings().all;
    all.erase(std::remove(all.begin(), all.end(), this), all.end());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  acked_.notify_all();
  // A second call (the destructor's, after the owner stopped the helper and closed the bootstrap) must
  // not touch the bootstrap: it is gone.
  if (!helper_.joinable()) return;
  bootstrap_.wakeRecvAny();  // else the helper notices only when its poll ends (a destroy took 0.1 s longer)
  joinThread(&helper_);
}

MappedAllocations::~MappedAllocations() {
  stop();
  for (int peer = 0; peer < nranks_; ++peer)
    for (int index = 0; index < kMaxMappedAllocations; ++index) unmapSlot(peer, static_cast<uint16_t>(index));
  for (const Offered& offered : offers_) withdrawOffers(offered.tokens);
  if (hostStaging_) cudaFreeHost(hostStaging_);
  if (copyStream_) cudaStreamDestroy(copyStream_);
  if (lastUse_) cudaEventDestroy(lastUse_);
  if (deviceTable_) cudaFree(deviceTable_);
}

void MappedAllocations::markUsed(cudaStream_t stream) {
  if (cudaEventRecord(lastUse_, stream) != cudaSuccess) cudaGetLastError();
}

// Each reason is logged once per communicator: a buffer of a kind that cannot be shared recurs every call.
void MappedAllocations::noteUnshared(const char* why) {
  const uint32_t bit = 1u << (std::hash<std::string>()(why) % 32);
  if (unsharedReasons_.fetch_or(bit) & bit) return;
  MSCCLPP_INFO(kColl, "rank %d: a buffer stays on scratch (no zero-copy): %s", rank_, why);
}

bool MappedAllocations::identify(const void* ptr, size_t bytes, AllocationKey* key, const char** why) {
  const CudaDriver* driver = cudaDriverOrNull();
  if (!driver || !driver->cuPointerGetAttributes) {
    *why = "the CUDA driver cannot describe it";
    return false;
  }
  // One query: whether CUDA IPC can share the memory, its identity and its extent.
  int ipcCapable = 0;
  unsigned long long bufferId = 0;  // NOLINT(runtime/int): the attribute's documented type
  CUdeviceptr start = 0;
  size_t rangeBytes = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                      CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* values[] = {&ipcCapable, &bufferId, &start, &rangeBytes};
  if (driver->cuPointerGetAttributes(4, attributes, values, reinterpret_cast<CUdeviceptr>(ptr)) !=
          CUDA_SUCCESS ||
      bufferId == 0) {
    *why = "it is not device memory that CUDA can identify";
    return false;
  }
  uint32_t sharing = kCudaIpc;
  if (!ipcCapable) {
    // cuMem memory: its descriptor maps the whole physical allocation that holds the buffer.
    void* base = nullptr;
    size_t size = 0;
    if (!isShareableAllocation(ptr, &base, &size)) {
      *why =
          "it is neither cudaMalloc memory nor cuMem memory with POSIX descriptor handles "
          "(managed, host or pool memory)";
      return false;
    }
    start = reinterpret_cast<CUdeviceptr>(base);
    rangeBytes = size;
    sharing = kDescriptor;
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  if (rangeBytes == 0 || address < start || address - start >= rangeBytes) {
    *why = "CUDA gives it no extent";
    return false;
  }
  *key = AllocationKey{bufferId, static_cast<uintptr_t>(start), rangeBytes, sharing, {}};
  if (bytes <= rangeBytes - (address - start)) return true;
  // Past its allocation: cuMem allocations mapped side by side are a run; cudaMalloc memory never is.
  if (sharing == kDescriptor && extendOverRun(driver, address + bytes, key)) return true;
  *why = sharing == kDescriptor ? "it spans cuMem allocations that are not all shareable, or too many"
                                : "it spans more than one allocation";
  return false;
}

bool MappedAllocations::use(const AllocationKey& key, uint64_t call, RegistryUse how,
                            std::unique_lock<std::mutex>* lock, uint16_t* index) {
  if (registry_.wouldEvict(key)) {
    // The peers will point the retired index at another allocation: every queued kernel that may reach
    // it through them must be done first. Calls are ordered, so waiting for the latest eager one is
    // enough. A captured call never waits on the device: it stays on scratch.
    if (how == RegistryUse::kCaptured) return false;
    lock->unlock();
    const bool settled = cudaEventSynchronize(lastUse_) == cudaSuccess;
    lock->lock();
    if (!settled) {
      cudaGetLastError();
      return false;
    }
  }
  std::vector<RegistryEvent> events;
  *index = registry_.use(key, call, how, &events);
  if (*index == AllocationRegistry::kNoIndex) return false;  // full of allocations that are held
  for (const RegistryEvent& event : events)
    if (event.kind == RegistryEvent::Kind::kExport) {
      ackGeneration_[event.index] = event.generation;  // before the export leaves: acks count from now
      acks_[event.index] = 0;
    }
  if (!events.empty()) {
    lock->unlock();
    for (const RegistryEvent& event : events) announce(event);
    lock->lock();
  }
  return true;
}

bool MappedAllocations::describe(const void* ptr, size_t bytes, uint64_t call, bool captured,
                                 double waitSeconds, MappedBuffer* out) {
  *out = MappedBuffer{};
  AllocationKey key;
  const char* why = nullptr;
  if (!identify(ptr, bytes, &key, &why)) {
    noteUnshared(why);
    return false;
  }
  std::unique_lock<std::mutex> lock(mu_);
  uint16_t index = 0;
  if (!use(key, call, captured ? RegistryUse::kCaptured : RegistryUse::kCall, &lock, &index)) return false;
  const uint32_t generation = registry_.generationOf(index);
  out->index = index;
  out->offset = reinterpret_cast<uintptr_t>(ptr) - key.base;
  auto ready = [&] { return acks_[index] == nranks_ - 1 && ackGeneration_[index] == generation; };
  if (!ready() && captured && waitSeconds > 0)
    acked_.wait_for(lock, std::chrono::duration<double>(waitSeconds), [&] { return ready() || stopping_; });
  out->ready = ready() ? 1 : 0;
  return true;
}

bool MappedAllocations::registerBuffer(const void* ptr, size_t bytes) {
  AllocationKey key;
  const char* why = nullptr;
  if (!identify(ptr, bytes, &key, &why)) {
    MSCCLPP_INFO(kInit, "rank %d: registered buffer %p (%zu bytes) stays on scratch: %s", rank_, ptr, bytes,
                 why);
    return false;
  }
  std::unique_lock<std::mutex> lock(mu_);
  uint16_t index = 0;
  return use(key, 0, RegistryUse::kRegistered, &lock, &index);
}

void MappedAllocations::unregisterBuffer(const void* ptr, size_t bytes) {
  AllocationKey key;
  const char* why = nullptr;
  if (!identify(ptr, bytes, &key, &why)) return;  // freed already: the helper retires it
  // Queued calls may still reach it through the peers' mappings.
  if (cudaEventSynchronize(lastUse_) != cudaSuccess) cudaGetLastError();
  std::vector<RegistryEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    registry_.unregister(key.bufferId, &events);
  }
  for (const RegistryEvent& event : events) announce(event);
}

// Offers the descriptors of `key`'s allocations to the peers' processes: the message names the server
// and the first offer, a run's pieces follow it. Peers that cannot fetch them never acknowledge: the
// allocation stays on scratch.
void MappedAllocations::offerDescriptors(const RegistryEvent& event, AllocationMessage* message,
                                         std::vector<RunPieceOffer>* pieces) {
  std::vector<uint64_t> tokens;
  uintptr_t base = event.key.base;
  for (const AllocationPiece& piece : piecesOf(event.key)) {
    int fd = -1;
    size_t offset = 0, size = 0;
    DescriptorOffer offer{};
    Status status = exportShareable(reinterpret_cast<void*>(base), &fd, &offset, &size);
    if (ok(status) && (offset != 0 || size != piece.bytes))
      status = fail(Status::kInternalError, "its descriptor maps %zu bytes from offset %zu", size, offset);
    if (ok(status)) status = offerDescriptor(fd, remotePids_, &offer);
    if (fd >= 0) close(fd);
    if (!ok(status)) {
      MSCCLPP_INFO(kInit, "rank %d: allocation %d cannot be exported as a descriptor: %s", rank_, event.index,
                   lastError());
      break;
    }
    if (tokens.empty()) message->offer = offer;
    tokens.push_back(offer.token);
    base += piece.bytes;
  }
  if (!event.key.pieces.empty()) {
    message->pieces = static_cast<uint16_t>(event.key.pieces.size());
    for (size_t i = 0; i < event.key.pieces.size(); ++i)
      pieces->push_back({event.key.pieces[i].bytes, i < tokens.size() ? tokens[i] : 0});
  }
  std::lock_guard<std::mutex> lock(mu_);
  Offered& offered = offers_[event.index];
  if (!offered.tokens.empty() && offered.generation > event.generation) {
    // A later allocation of the index was offered meanwhile (from another thread): this one is gone.
    withdrawOffers(tokens);
    return;
  }
  withdrawOffers(offered.tokens);
  offered = Offered{std::move(tokens), event.generation};
}

// Tells every peer of an export (with what it needs to map the allocation) or a retirement.
void MappedAllocations::announce(const RegistryEvent& event) {
  AllocationMessage message{};
  message.index = event.index;
  message.generation = event.generation;
  message.base = event.key.base;
  message.bytes = event.key.bytes;
  message.sharing = event.key.sharing;
  {
    // The index's allocation of this generation, or any older one, is gone (a retirement and the next
    // export of its index may be announced from two threads, in either order).
    std::lock_guard<std::mutex> lock(mu_);
    Offered& offered = offers_[event.index];
    if (!offered.tokens.empty() && offered.generation <= event.generation) {
      withdrawOffers(offered.tokens);
      offered = Offered{};
    }
  }
  std::vector<RunPieceOffer> pieces;
  message.kind =
      event.kind == RegistryEvent::Kind::kExport ? AllocationMessage::kExport : AllocationMessage::kRetire;
  if (event.kind == RegistryEvent::Kind::kExport) {
    RelaxedCapture relaxed;
    if (event.key.sharing == kCudaIpc &&
        cudaIpcGetMemHandle(&message.handle, reinterpret_cast<void*>(event.key.base)) != cudaSuccess) {
      cudaGetLastError();
      // Peers in other processes cannot map it and will not acknowledge: it stays on scratch.
      MSCCLPP_INFO(kInit, "rank %d: allocation %d cannot be exported over CUDA IPC", rank_, event.index);
    }
    if (event.key.sharing == kDescriptor && !remotePids_.empty()) offerDescriptors(event, &message, &pieces);
  }
  std::vector<char> bytes(sizeof(message) + pieces.size() * sizeof(RunPieceOffer));
  memcpy(bytes.data(), &message, sizeof(message));
  if (!pieces.empty())
    memcpy(bytes.data() + sizeof(message), pieces.data(), pieces.size() * sizeof(RunPieceOffer));
  for (int peer = 0; peer < nranks_; ++peer)
    if (peer != rank_ && !ok(bootstrap_.send(peer, kAllocationTag, bytes.data(), bytes.size())))
      MSCCLPP_INFO(kInit, "rank %d: cannot tell rank %d about allocation %d: %s", rank_, peer, event.index,
                   lastError());
}

// Allocations whose memory was freed (CUDA no longer knows their buffer id at their start) are retired,
// so that the peers close their mappings and the driver gets the memory back. A free waits for the work
// queued on the memory, and calls that reached it through a peer ended with the owner's (the "finished"
// barrier); the latest eager call is still waited for, since a free of cuMem memory need not wait.
void MappedAllocations::retireFreedAllocations() {
  const CudaDriver* driver = cudaDriverOrNull();
  if (!driver || !driver->cuPointerGetAttribute) return;
  std::vector<AllocationKey> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys = registry_.allocations();
  }
  std::vector<uint64_t> freed;
  for (const AllocationKey& key : keys) {
    uintptr_t base = key.base;
    for (const AllocationPiece& piece : piecesOf(key)) {
      if (bufferIdAt(driver, base) != piece.bufferId) {
        freed.push_back(key.bufferId);
        break;
      }
      base += piece.bytes;
    }
  }
  cudaGetLastError();
  if (freed.empty()) return;
  if (cudaEventSynchronize(lastUse_) != cudaSuccess) cudaGetLastError();
  std::vector<RegistryEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t id : freed) registry_.forget(id, &events);
  }
  for (const RegistryEvent& event : events) announce(event);
}

// The helper thread: maps what peers export, unmaps what they retire, counts their acknowledgements.
void MappedAllocations::serve() {
  cudaSetDevice(device_);
  cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&relaxed);
  Deadline nextFreedCheck = deadlineAfter(kFreedCheckSeconds);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (secondsLeft(nextFreedCheck) <= 0) {
      retireFreedAllocations();
      nextFreedCheck = deadlineAfter(kFreedCheckSeconds);
    }
    int peer = -1;
    std::vector<char> bytes;
    const Status status = bootstrap_.recvAny(kAllocationTag, kServePollSeconds, &peer, &bytes);
    if (status == Status::kTimeout) continue;
    if (!ok(status)) return;  // aborted or broken: nothing more will arrive
    AllocationMessage message;
    if (bytes.size() < sizeof(message) || peer == rank_) continue;
    memcpy(&message, bytes.data(), sizeof(message));
    if (message.index >= kMaxMappedAllocations || message.pieces > kMaxRunPieces ||
        bytes.size() != sizeof(message) + message.pieces * sizeof(RunPieceOffer))
      continue;
    switch (message.kind) {
      case AllocationMessage::kExport: {
        std::vector<RunPieceOffer> pieces(message.pieces);
        if (!pieces.empty())
          memcpy(pieces.data(), bytes.data() + sizeof(message), pieces.size() * sizeof(RunPieceOffer));
        mapPeerAllocation(peer, message, pieces);
        break;
      }
      case AllocationMessage::kRetire:
        if (peerSlots_[peer][message.index].generation == message.generation) unmapSlot(peer, message.index);
        break;
      case AllocationMessage::kAck: {
        std::lock_guard<std::mutex> lock(mu_);
        if (ackGeneration_[message.index] == message.generation) ++acks_[message.index];
        acked_.notify_all();
        break;
      }
      default:
        break;
    }
  }
}

// Fetches the descriptors of a peer's exported allocation (a run's pieces in order) and maps them side by
// side; the slot records the pieces. False (with a warning) where any cannot be fetched or mapped.
bool MappedAllocations::importPeerDescriptors(int peer, const AllocationMessage& message,
                                              const std::vector<RunPieceOffer>& pieces, Slot* slot) {
  std::vector<ImportedPiece> imported;
  std::string why;
  const std::vector<RunPieceOffer> offers =
      pieces.empty() ? std::vector<RunPieceOffer>{{message.bytes, message.offer.token}} : pieces;
  for (const RunPieceOffer& piece : offers) {
    DescriptorOffer offer = message.offer;
    offer.token = piece.token;
    const int fd =
        fetchDescriptor(offer, deadlineAfter(kFetchSeconds), [this] { return bootstrap_.aborted(); }, &why);
    if (fd < 0) break;
    imported.push_back({fd, piece.bytes});
  }
  void* mapping = nullptr;
  const bool mapped = imported.size() == offers.size() && ok(importShareable(imported, &mapping));
  if (imported.size() == offers.size() && !mapped) why = lastError();
  for (const ImportedPiece& piece : imported) close(piece.fd);
  if (!mapped) {
    logWarn("rank %d: cannot map allocation %d of rank %d (%s): it stays on scratch", rank_, message.index,
            peer, why.c_str());
    return false;
  }
  slot->mapping = mapping;
  for (const RunPieceOffer& piece : offers) slot->mappedPieces.push_back(piece.bytes);
  return true;
}

void MappedAllocations::mapPeerAllocation(int peer, const AllocationMessage& message,
                                          const std::vector<RunPieceOffer>& pieces) {
  unmapSlot(peer, message.index);  // its previous allocation was retired (or the message is lost)
  Slot& slot = peerSlots_[peer][message.index];
  if (topology_.sameProcess(rank_, peer)) {
    // Nothing to open: the owner's addresses are this process's.
  } else if (message.sharing == kDescriptor) {
    if (!importPeerDescriptors(peer, message, pieces, &slot)) return;
  } else {
    slot.mapping = ProcessMappings::get().open(message.handle);
    if (!slot.mapping) {
      MSCCLPP_INFO(kInit, "rank %d: cannot map allocation %d of rank %d: it stays on scratch", rank_,
                   message.index, peer);
      return;
    }
  }
  char* base = slot.mapping ? static_cast<char*>(slot.mapping) : reinterpret_cast<char*>(message.base);
  slot.generation = message.generation;
  // Never acknowledged if the entry cannot be written: it stays on scratch.
  if (!writeTableEntry(peer, message.index, MappedRegion{base, message.bytes})) return;
  AllocationMessage ack{};
  ack.kind = AllocationMessage::kAck;
  ack.index = message.index;
  ack.generation = message.generation;
  bootstrap_.send(peer, kAllocationTag, &ack, sizeof(ack));
}

void MappedAllocations::unmapSlot(int peer, uint16_t index) {
  Slot& slot = peerSlots_[peer][index];
  if (slot.mapping && !slot.mappedPieces.empty())
    unmapImported(slot.mapping, slot.mappedPieces);
  else if (slot.mapping)
    ProcessMappings::get().close(slot.mapping);
  slot = Slot{};
}

// Written and complete before the acknowledgement leaves, so every kernel that the owner then launches
// ready finds it here.
bool MappedAllocations::writeTableEntry(int peer, uint16_t index, const MappedRegion& region) {
  *hostStaging_ = region;
  MappedRegion* entry = deviceTable_ + static_cast<size_t>(peer) * kMaxMappedAllocations + index;
  if (cudaMemcpyAsync(entry, hostStaging_, sizeof(MappedRegion), cudaMemcpyHostToDevice, copyStream_) !=
          cudaSuccess ||
      cudaStreamSynchronize(copyStream_) != cudaSuccess) {
    cudaGetLastError();
    logWarn("rank %d: cannot record the mapping of rank %d's allocation %d", rank_, peer, index);
    return false;
  }
  return true;
}

}  // namespace mscclpp_nccl
