// Lets ncclCommAbort of a communicator reach bootstraps that another thread is still setting up under
// it (the child of an ncclCommSplit or ncclCommShrink waits in its own rendezvous, which the parent's
// bootstrap knows nothing of). Raising the link aborts every bootstrap attached to it, now or later.
#pragma once

#include <mutex>
#include <vector>

namespace mscclpp_nccl {

class Bootstrap;

class AbortLink {
 public:
  void raise();
  bool raised() const;
  // Aborts `bootstrap` at once when the link was raised already.
  void attach(Bootstrap* bootstrap);
  void detach(Bootstrap* bootstrap);

 private:
  mutable std::mutex mu_;  // also keeps a detaching bootstrap alive while raise() aborts it
  bool raised_ = false;
  std::vector<Bootstrap*> attached_;
};

}  // namespace mscclpp_nccl
