#include "native/algorithms/one_sided.h"

#include <utility>

#include "native/transport/cuda_check.h"

namespace mscclpp_nccl {

void OneSided::bind(int rank, std::vector<uint64_t*> peers, uint64_t* local) {
  rank_ = rank;
  local_ = local;
  peers_ = std::move(peers);
  sent_.assign(peers_.size(), 0);
  awaited_.assign(peers_.size(), 0);
}

Status OneSided::put(const void* src, void* peerDst, size_t bytes, int peer, cudaStream_t stream) {
  if (bytes > 0) MSCCLPP_CUDA_TRY(cudaMemcpyAsync(peerDst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  return signal(peer, stream);
}

Status OneSided::signal(int peer, cudaStream_t stream) {
  // This rank's counter in the peer's memory.
  MSCCLPP_TRY(launchSignalPublish(peers_[peer] + rank_, sent_[peer] + 1, stream));
  ++sent_[peer];
  return Status::kSuccess;
}

Status OneSided::wait(const std::vector<uint64_t>& counts, const WaitControl& control, cudaStream_t stream) {
  SignalTargets targets{};
  for (size_t r = 0; r < counts.size(); ++r) targets.total[r] = counts[r] == 0 ? 0 : awaited_[r] + counts[r];
  MSCCLPP_TRY(launchSignalWait(local_, targets, static_cast<int>(counts.size()), control, stream));
  for (size_t r = 0; r < counts.size(); ++r) awaited_[r] += counts[r];
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
