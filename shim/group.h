// ncclGroupStart/ncclGroupEnd bookkeeping, per thread. Work issued inside a group is queued and runs
// at the outermost ncclGroupEnd: initialisations concurrently (ranks initialised from one thread
// rendezvous with each other), collectives in the order they were called.
#pragma once

#include <functional>

#include "shim/api.h"

int groupDepth();
// Queues `work` for the outermost ncclGroupEnd of this thread. Concurrent work (initialisations)
// runs on threads of its own, joined before ncclGroupEnd returns.
void deferToGroupEnd(std::function<ncclResult_t()> work, bool concurrent);
