#include "native/transport/block_share.h"

#include <algorithm>
#include <array>

#include "native/common/parameters.h"
#include "native/device/grid_limits.h"

namespace mscclpp_nccl {
namespace {

constexpr int kMaxDevices = 256;
// No kernel launches a larger grid, so a communicator never holds more.
constexpr int kLargestGrid = std::max({kMaxPacketBlocks, kMaxChunkBlocks, kMaxZeroCopyBlocks});

// One GPU as this process sees it.
struct DevicePool {
  int ranksOnGpu = 1;      // the most ranks on the GPU any communicator has seen
  int ranksOfProcess = 1;  // the most of them in this process
  int smCount = 1;
  int held = 0;  // blocks held by live communicators (and by proposals being agreed)

  int capacity() const { return BlockShare::rankShare(smCount, ranksOnGpu) * ranksOfProcess; }
};

std::mutex& poolMutex() {
  static std::mutex* mutex = new std::mutex();  // never freed: communicators may end at exit
  return *mutex;
}

DevicePool& pool(int device) {
  static auto* pools = new std::array<DevicePool, kMaxDevices>();
  return (*pools)[std::clamp(device, 0, kMaxDevices - 1)];
}

}  // namespace

int BlockShare::rankShare(int smCount, int ranksOnGpu) {
  return std::max(1, smCount / std::max(1, ranksOnGpu));
}

int BlockShare::earlyBlocks(int grid) {
  // With early launch off (MSCCLPP_NCCL_EARLY_LAUNCH=0) no kernel parks: a communicator holds one grid.
  static const bool earlyLaunch = readInteger(Param::kEarlyLaunch) != 0;
  return earlyLaunch ? std::min(kEarlyLaunchMaxBlocks, grid / 2) : 0;
}

int BlockShare::gridWithin(int blocks) {
  int grid = 1;
  while (grid < kLargestGrid && held(grid + 1) <= blocks) ++grid;
  return grid;
}

int BlockShare::heldOn(int device) {
  std::lock_guard<std::mutex> lock(poolMutex());
  return pool(device).held;
}

int BlockShare::capacityOn(int device) {
  std::lock_guard<std::mutex> lock(poolMutex());
  return pool(device).capacity();
}

BlockShare::BlockShare(int device, int smCount, int ranksOnGpu, int ranksOfProcess) : device_(device) {
  std::lock_guard<std::mutex> lock(poolMutex());
  DevicePool& p = pool(device_);
  p.smCount = std::max(p.smCount, smCount);
  p.ranksOnGpu = std::max(p.ranksOnGpu, ranksOnGpu);
  p.ranksOfProcess = std::max(p.ranksOfProcess, ranksOfProcess);
  // What is free, but never more than one rank's share (several ranks of this process draw on the pool).
  const int free = std::min(p.capacity() - p.held, rankShare(p.smCount, p.ranksOnGpu));
  grid_ = gridWithin(free);
  p.held += held(grid_);
}

BlockShare::~BlockShare() { resize(0); }

void BlockShare::settle(int agreed) { resize(std::clamp(agreed, 1, grid_)); }

int BlockShare::halve() {
  resize(std::max(1, gridWithin(held(grid_) / 2)));
  return grid_;
}

void BlockShare::resize(int grid) {
  std::lock_guard<std::mutex> lock(poolMutex());
  pool(device_).held += (grid > 0 ? held(grid) : 0) - held(grid_);
  grid_ = grid;
}

}  // namespace mscclpp_nccl
