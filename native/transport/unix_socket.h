// Unix sockets that pass file descriptors between processes of one user (cuMem allocations are shared as
// POSIX file descriptors, which only a unix socket can carry). Names live in the abstract namespace:
// nothing to clean up in the file system, but no permissions either, so both ends check each other's
// credentials: our uid, and the pid that the other side announced over the authenticated bootstrap.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "native/bootstrap/socket.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

// A random socket name: none to predict and bind first (/proc/net/unix lists them).
struct UnixSocketName {
  uint8_t bytes[16];
};

Status newUnixSocketName(UnixSocketName* out);

// A non-blocking, close-on-exec socket listening on `name`, with the largest backlog the kernel allows
// (any local user can connect; the listener is drained continuously). -1 on failure.
int listenOnUnixSocket(const UnixSocketName& name);

// The process at the other end of a connected unix socket, as the kernel saw it connect (or listen).
bool peerCredentials(int socket, ucred* out);
// Whether those credentials are process `pid` of our effective uid.
bool isOurProcess(const ucred& peer, int32_t pid);

// Waits in short slices until one of `fds` has an event (true), or the deadline, or `aborted()` (false),
// so that an abort ends the wait at once.
bool waitAnyReadable(std::vector<pollfd>* fds, Deadline deadline, const std::function<bool()>& aborted);
// The same for one descriptor, true only when it is readable.
bool waitReadable(int fd, Deadline deadline, const std::function<bool()>& aborted);

// Sends `fd` as SCM_RIGHTS with one byte of payload; never blocks.
bool sendDescriptor(int socket, int fd);
// Receives a descriptor sent by sendDescriptor, waiting as waitReadable does; -1 on failure. The
// descriptor is close-on-exec.
int recvDescriptor(int socket, Deadline deadline, const std::function<bool()>& aborted);

// Connects to `name`, checks that process `pid` of our uid listens there (else it could hand us a
// descriptor of its choosing), and sends `hello`. Connecting completes without the listener accepting,
// up to its backlog; where strangers filled the backlog the connect is retried until `deadline`. Returns
// the connected socket, or -1 with `*why` set.
int connectToProcess(const UnixSocketName& name, int32_t pid, const void* hello, size_t helloBytes,
                     Deadline deadline, const std::function<bool()>& aborted, std::string* why);

}  // namespace mscclpp_nccl
