#include "native/transport/mapped_allocations.h"

#include <chrono>
#include <cstring>
#include <map>
#include <string>

#include "native/common/logging.h"
#include "native/transport/cuda_check.h"
#include "native/transport/cuda_driver.h"
#include "native/transport/setup_copy.h"

namespace mscclpp_nccl {

constexpr int kAllocationTag = 0x5ef0;

// One bootstrap message of this protocol.
struct AllocationMessage {
  enum Kind : uint32_t { kExport = 1, kRetire = 2, kAck = 3 };
  uint32_t kind;
  uint32_t generation;
  uint16_t index;
  uint16_t unused[3];
  uint64_t base;  // kExport: the allocation's start in the owner's process (for ranks in that process)
  cudaIpcMemHandle_t handle;  // kExport: for ranks in other processes
};

namespace {

constexpr double kServePollSeconds = 0.1;

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
      peerSlots_(bootstrap.size(), std::vector<Slot>(kMaxMappedAllocations)) {}

Status MappedAllocations::create(Bootstrap& bootstrap, const Topology& topology, int device,
                                 std::unique_ptr<MappedAllocations>* out) {
  std::unique_ptr<MappedAllocations> self(new MappedAllocations(bootstrap, topology, device));
  const size_t tableBytes = sizeof(char*) * kMaxMappedAllocations * self->nranks_;
  MSCCLPP_CUDA_TRY(cudaMalloc(&self->deviceTable_, tableBytes));
  MSCCLPP_TRY(zeroDeviceMemory(self->deviceTable_, tableBytes));
  MSCCLPP_CUDA_TRY(cudaStreamCreateWithFlags(&self->copyStream_, cudaStreamNonBlocking));
  MSCCLPP_CUDA_TRY(cudaEventCreateWithFlags(&self->lastUse_, cudaEventDisableTiming));
  MSCCLPP_CUDA_TRY(cudaHostAlloc(&self->hostStaging_, sizeof(char*), cudaHostAllocPortable));
  MappedAllocations* raw = self.get();
  self->helper_ = std::thread([raw] { raw->serve(); });
  *out = std::move(self);
  return Status::kSuccess;
}

void MappedAllocations::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  acked_.notify_all();
  if (helper_.joinable()) helper_.join();
}

MappedAllocations::~MappedAllocations() {
  stop();
  for (int peer = 0; peer < nranks_; ++peer)
    for (int index = 0; index < kMaxMappedAllocations; ++index) unmapSlot(peer, static_cast<uint16_t>(index));
  if (hostStaging_) cudaFreeHost(hostStaging_);
  if (copyStream_) cudaStreamDestroy(copyStream_);
  if (lastUse_) cudaEventDestroy(lastUse_);
  if (deviceTable_) cudaFree(deviceTable_);
}

void MappedAllocations::markUsed(cudaStream_t stream) {
  if (cudaEventRecord(lastUse_, stream) != cudaSuccess) cudaGetLastError();
}

bool MappedAllocations::describe(const void* ptr, size_t bytes, uint64_t call, bool captured,
                                 double waitSeconds, MappedBuffer* out) {
  *out = MappedBuffer{};
  const CudaDriver* driver = cudaDriverOrNull();
  if (!driver || !driver->cuPointerGetAttributes) return false;
  // One query: whether CUDA IPC can share the memory, its identity and its extent.
  int ipcCapable = 0;
  unsigned long long bufferId = 0;
  CUdeviceptr start = 0;
  size_t rangeBytes = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                      CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* values[] = {&ipcCapable, &bufferId, &start, &rangeBytes};
  if (driver->cuPointerGetAttributes(4, attributes, values, reinterpret_cast<CUdeviceptr>(ptr)) !=
          CUDA_SUCCESS ||
      !ipcCapable || bufferId == 0 || rangeBytes == 0)
    return false;
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  if (address < start || address + bytes > start + rangeBytes) return false;

  const AllocationKey key{bufferId, static_cast<uintptr_t>(start), rangeBytes};
  std::vector<RegistryEvent> events;
  std::unique_lock<std::mutex> lock(mu_);
  if (registry_.wouldEvict(key)) {
    // The peers will point the retired index at another allocation: every queued kernel that may reach
    // it through them must be done first. Calls are ordered, so waiting for the latest eager one is
    // enough. A captured call never waits on the device: it stays on scratch.
    if (captured) return false;
    lock.unlock();
    const bool settled = cudaEventSynchronize(lastUse_) == cudaSuccess;
    lock.lock();
    if (!settled) {
      cudaGetLastError();
      return false;
    }
  }
  const uint16_t index = registry_.use(key, call, captured, &events);
  if (index == AllocationRegistry::kNoIndex) return false;  // full of allocations that graphs hold
  const uint32_t generation = registry_.generationOf(index);
  for (const RegistryEvent& event : events)
    if (event.kind == RegistryEvent::Kind::kExport) {
      ackGeneration_[event.index] = event.generation;  // before the export leaves: acks count from now
      acks_[event.index] = 0;
    }
  if (!events.empty()) {
    lock.unlock();
    for (const RegistryEvent& event : events) announce(event);
    lock.lock();
  }
  out->index = index;
  out->offset = address - start;
  auto ready = [&] { return acks_[index] == nranks_ - 1 && ackGeneration_[index] == generation; };
  if (!ready() && captured && waitSeconds > 0)
    acked_.wait_for(lock, std::chrono::duration<double>(waitSeconds), [&] { return ready() || stopping_; });
  out->ready = ready() ? 1 : 0;
  return true;
}

// Tells every peer of an export (with what it needs to map the allocation) or a retirement.
void MappedAllocations::announce(const RegistryEvent& event) {
  AllocationMessage message{};
  message.index = event.index;
  message.generation = event.generation;
  message.base = event.key.base;
  if (event.kind == RegistryEvent::Kind::kExport) {
    message.kind = AllocationMessage::kExport;
    RelaxedCapture relaxed;
    if (cudaIpcGetMemHandle(&message.handle, reinterpret_cast<void*>(event.key.base)) != cudaSuccess) {
      cudaGetLastError();
      // Peers in other processes cannot map it and will not acknowledge: it stays on scratch.
      MSCCLPP_INFO(kInit, "rank %d: allocation %d cannot be exported over CUDA IPC", rank_, event.index);
    }
  } else {
    message.kind = AllocationMessage::kRetire;
  }
  for (int peer = 0; peer < nranks_; ++peer)
    if (peer != rank_ && !ok(bootstrap_.send(peer, kAllocationTag, &message, sizeof(message))))
      MSCCLPP_INFO(kInit, "rank %d: cannot tell rank %d about allocation %d: %s", rank_, peer, event.index,
                   lastError());
}

// The helper thread: maps what peers export, unmaps what they retire, counts their acknowledgements.
void MappedAllocations::serve() {
  cudaSetDevice(device_);
  cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&relaxed);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    int peer = -1;
    std::vector<char> bytes;
    const Status status = bootstrap_.recvAny(kAllocationTag, kServePollSeconds, &peer, &bytes);
    if (status == Status::kTimeout) continue;
    if (!ok(status)) return;  // aborted or broken: nothing more will arrive
    AllocationMessage message;
    if (bytes.size() != sizeof(message) || peer == rank_) continue;
    memcpy(&message, bytes.data(), sizeof(message));
    if (message.index >= kMaxMappedAllocations) continue;
    switch (message.kind) {
      case AllocationMessage::kExport:
        mapPeerAllocation(peer, message);
        break;
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

void MappedAllocations::mapPeerAllocation(int peer, const AllocationMessage& message) {
  unmapSlot(peer, message.index);  // its previous allocation was retired (or the message is lost)
  char* base = nullptr;
  Slot& slot = peerSlots_[peer][message.index];
  if (topology_.sameProcess(rank_, peer)) {
    base = reinterpret_cast<char*>(message.base);
  } else {
    void* mapping = ProcessMappings::get().open(message.handle);
    if (!mapping) {
      MSCCLPP_INFO(kInit, "rank %d: cannot map allocation %d of rank %d: it stays on scratch", rank_,
                   message.index, peer);
      return;
    }
    slot.mapping = mapping;
    base = static_cast<char*>(mapping);
  }
  slot.generation = message.generation;
  if (!writeTableEntry(peer, message.index, base)) return;  // never acknowledged: it stays on scratch
  AllocationMessage ack{};
  ack.kind = AllocationMessage::kAck;
  ack.index = message.index;
  ack.generation = message.generation;
  bootstrap_.send(peer, kAllocationTag, &ack, sizeof(ack));
}

void MappedAllocations::unmapSlot(int peer, uint16_t index) {
  Slot& slot = peerSlots_[peer][index];
  if (slot.mapping) ProcessMappings::get().close(slot.mapping);
  slot = Slot{};
}

// Written and complete before the acknowledgement leaves, so every kernel that the owner then launches
// ready finds it here.
bool MappedAllocations::writeTableEntry(int peer, uint16_t index, char* base) {
  *hostStaging_ = base;
  char** entry = deviceTable_ + static_cast<size_t>(peer) * kMaxMappedAllocations + index;
  if (cudaMemcpyAsync(entry, hostStaging_, sizeof(char*), cudaMemcpyHostToDevice, copyStream_) !=
          cudaSuccess ||
      cudaStreamSynchronize(copyStream_) != cudaSuccess) {
    cudaGetLastError();
    logWarn("rank %d: cannot record the mapping of rank %d's allocation %d", rank_, peer, index);
    return false;
  }
  return true;
}

}  // namespace mscclpp_nccl
