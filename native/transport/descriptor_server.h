// Point-to-point descriptor passing for zero-copy on cuMem memory (transport/mapped_allocations.h): a
// rank offers the descriptor of one exported allocation to the processes of its peers, tells them over
// the bootstrap where to fetch it, and goes on; each peer fetches it when it maps the allocation. One
// server per process, on a thread of its own, serves every offer of every communicator, so that a fetch
// never waits for a thread that is itself fetching.
//
// The credential checks are those of fd_passing.h: the server hands a descriptor only to a connection
// from a process it was offered to (our uid, a pid announced over the authenticated bootstrap) that
// presents the offer's token, once per process; the client checks that the server is the process its
// peer announced. Strangers are dropped at once, whatever they send or withhold.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "native/bootstrap/socket.h"
#include "native/common/status.h"
#include "native/transport/unix_socket.h"

namespace mscclpp_nccl {

// Where and how to fetch one offered descriptor.
struct DescriptorOffer {
  UnixSocketName server;
  int32_t pid;  // the offering process
  uint32_t unused;
  uint64_t token;  // secret: names the offer and proves the fetcher is a peer
};

// Offers a duplicate of `fd` to each process in `pids` once (the caller keeps and closes `fd`). Starts
// the process's server on first use.
Status offerDescriptor(int fd, const std::vector<int32_t>& pids, DescriptorOffer* out);
// Withdraws an offer (its duplicate is closed): the allocation it shares is gone, or every peer has it.
void withdrawDescriptor(uint64_t token);
// Offers still held, for tests.
size_t heldDescriptorOffers();

// Fetches an offered descriptor (close-on-exec; the caller closes it), waiting until `deadline` or
// `aborted()`. -1 with `*why` set on failure.
int fetchDescriptor(const DescriptorOffer& offer, Deadline deadline, const std::function<bool()>& aborted,
                    std::string* why);

}  // namespace mscclpp_nccl
