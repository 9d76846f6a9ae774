#include "native/bootstrap/abort_link.h"

#include <algorithm>

#include "native/bootstrap/bootstrap.h"

namespace mscclpp_nccl {

void AbortLink::raise() {
  std::lock_guard<std::mutex> lock(mu_);
  raised_ = true;
  for (Bootstrap* bootstrap : attached_) bootstrap->abort();
}

bool AbortLink::raised() const {
  std::lock_guard<std::mutex> lock(mu_);
  return raised_;
}

void AbortLink::attach(Bootstrap* bootstrap) {
  std::lock_guard<std::mutex> lock(mu_);
  attached_.push_back(bootstrap);
  if (raised_) bootstrap->abort();
}

void AbortLink::detach(Bootstrap* bootstrap) {
  std::lock_guard<std::mutex> lock(mu_);
  attached_.erase(std::remove(attached_.begin(), attached_.end(), bootstrap), attached_.end());
}

}  // namespace mscclpp_nccl
