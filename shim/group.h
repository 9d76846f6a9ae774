// ncclGroupStart/ncclGroupEnd bookkeeping, per thread. Work issued inside a group is queued and runs
// at the outermost ncclGroupEnd: initialisations concurrently (ranks initialised from one thread
// rendezvous with each other), collectives in the order they were called.
#pragma once

#include <cstdint>
#include <functional>

#include "shim/api.h"

int groupDepth();
// Counts closed outermost groups of this thread: state kept for "the current group" is stale once
// this changes (ncclGroupSimulateEnd drops queued work without running it).
uint64_t groupEpoch();
// Queues `work` for the outermost ncclGroupEnd of this thread. Concurrent work (initialisations,
// window registrations) runs on threads of its own, joined before ncclGroupEnd returns; items with the
// same `orderKey` (a communicator's registrations, collective in call order) share one thread, in order.
void deferToGroupEnd(std::function<ncclResult_t()> work, bool concurrent, const void* orderKey = nullptr);
