// Passing file descriptors between the processes of a communicator (cuMem allocations are shared as
// POSIX file descriptors, which only a unix socket can carry). Each offering rank listens on an
// abstract unix socket with a random name; every rank in another process connects and receives the
// descriptor. Abstract sockets have no permissions, so both ends check each other's credentials (our
// uid, and the pid the rank announced over the authenticated bootstrap) and a client also presents a
// token from that bootstrap. Collective over the bootstrap.
#pragma once

#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "native/common/status.h"
#include "native/transport/rank_info.h"

namespace mscclpp_nccl {

// Every rank offers `offeredFd` (-1: none) and receives, in `received[r]`, its own duplicate of rank r's
// descriptor where r is in another process and offered one, else -1. The caller closes what it
// receives. Fails on every rank alike only through the bootstrap; a failure to reach one peer's socket
// leaves -1 there and is this rank's alone (callers agree on the outcome afterwards). Waits at most until
// the rendezvous deadline (MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT) and ends at once on an abort; strangers
// connecting to the socket are dropped without delaying the peers, and a backlog they filled is retried
// for a while. Peers in another pid namespace fail the pid check and get -1 (their windows then copy
// through scratch). Every -1 for a peer that offered is explained by a WARN line.
Status exchangeFds(Bootstrap& bootstrap, const Topology& topology, int offeredFd, std::vector<int>* received);

}  // namespace mscclpp_nccl
