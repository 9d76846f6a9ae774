// A variable that the private stock NCCL must see while it initialises a communicator, and that
// ncclConfig_t has no field for (NCCL_MULTI_RANK_GPU_ENABLE when ranks share a GPU). It is set, only
// where the user left it unset, while at least one stock init of this process is under way, and
// removed when the last one ends, so that the user's environment is as it was once they return.
//
// Stock initialisation is collective: members of one stock communicator that live in one process
// (one process driving several GPUs, or several ranks on one GPU) initialise at the same time, from
// threads of their own. So every init holds the variable, and none holds a lock while it waits.
// setenv races with other threads' getenv; that is accepted at communicator init only.
#pragma once

namespace mscclpp_nccl {

class InitVariable {
 public:
  // Holds `name`=`value` for this object's life when `needed` (and the user has not set `name`).
  InitVariable(const char* name, const char* value, bool needed);
  ~InitVariable();
  InitVariable(const InitVariable&) = delete;
  InitVariable& operator=(const InitVariable&) = delete;

 private:
  const char* name_;
  bool held_ = false;
};

}  // namespace mscclpp_nccl
