#include "native/transport/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "native/bootstrap/socket.h"
#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

std::atomic<uint64_t> socketSerial{0};

struct Offer {
  uint64_t processId;
  uint64_t serial;
  uint64_t token;    // a client proves it is a peer by sending this first (socket names are public)
  int32_t offering;  // 1: listening, its descriptor can be fetched
};

socklen_t socketAddress(uint64_t processId, uint64_t serial, sockaddr_un* address) {
  memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): nothing to clean up in the file system.
  int length = snprintf(address->sun_path + 1, sizeof(address->sun_path) - 1, "mscclpp-nccl.%016llx.%llu",
                        static_cast<unsigned long long>(processId), static_cast<unsigned long long>(serial));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
}

// Waits in short slices, so that aborting the bootstrap (ncclCommAbort) ends the wait at once.
bool readable(const Bootstrap& bootstrap, int fd, Deadline deadline) {
  constexpr double kSliceSeconds = 0.05;
  while (!bootstrap.aborted()) {
    const double left = secondsLeft(deadline);
    if (left <= 0) return false;
    pollfd entry{fd, POLLIN, 0};
    int n = poll(&entry, 1, static_cast<int>(std::min(left, kSliceSeconds) * 1000.0) + 1);
    if (n == 1) return (entry.revents & POLLIN) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
  return false;
}

// One byte of payload carrying (or ready to carry) one descriptor as SCM_RIGHTS ancillary data.
struct FdMessage {
  char byte = 0;
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};

  FdMessage() {
    header.msg_iov = &io;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;  // the header points into the object
  FdMessage& operator=(const FdMessage&) = delete;
};

bool sendFd(int socket, int fd) {
  FdMessage message;
  cmsghdr* rights = CMSG_FIRSTHDR(&message.header);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(rights), &fd, sizeof(int));
  return sendmsg(socket, &message.header, MSG_NOSIGNAL) == 1;
}

int recvFd(const Bootstrap& bootstrap, int socket, Deadline deadline) {
  if (!readable(bootstrap, socket, deadline)) return -1;
  FdMessage message;
  if (recvmsg(socket, &message.header, MSG_CMSG_CLOEXEC) != 1) return -1;
  cmsghdr* rights = CMSG_FIRSTHDR(&message.header);
  if (rights == nullptr || rights->cmsg_level != SOL_SOCKET || rights->cmsg_type != SCM_RIGHTS) return -1;
  int fd = -1;
  memcpy(&fd, CMSG_DATA(rights), sizeof(int));
  return fd;
}

int listenOn(uint64_t processId, uint64_t serial, int backlog) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address;
  socklen_t length = socketAddress(processId, serial, &address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, backlog) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Connecting to a listening unix socket completes without the peer accepting (up to its backlog).
int connectTo(const Offer& offer) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address;
  socklen_t length = socketAddress(offer.processId, offer.serial, &address);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      send(fd, &offer.token, sizeof(offer.token), MSG_NOSIGNAL) != sizeof(offer.token)) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

Status exchangeFds(Bootstrap& bootstrap, const Topology& topology, int offeredFd,
                   std::vector<int>* received) {
  const int rank = bootstrap.rank(), nranks = bootstrap.size();
  const Deadline deadline = deadlineAfter(bootstrapTimeoutSeconds());
  received->assign(nranks, -1);
  auto remote = [&](int r) { return r != rank && !topology.sameProcess(rank, r); };

  std::vector<Offer> offers(nranks);
  const uint64_t serial = socketSerial.fetch_add(1);
  int listener = offeredFd >= 0 ? listenOn(topology.ranks[rank].processId, serial, nranks) : -1;
  const uint64_t token = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  offers[rank] = Offer{topology.ranks[rank].processId, serial, token, listener >= 0 ? 1 : 0};
  Status status = bootstrap.allGather(offers.data(), sizeof(Offer));

  // Connect to every offer first, say who reached whom, then serve and receive: no order can deadlock.
  std::vector<int> connections(nranks, -1);
  std::vector<uint8_t> reached(static_cast<size_t>(nranks) * nranks, 0);
  if (ok(status)) {
    for (int r = 0; r < nranks; ++r) {
      if (!remote(r) || !offers[r].offering) continue;
      connections[r] = connectTo(offers[r]);
      reached[static_cast<size_t>(rank) * nranks + r] = connections[r] >= 0;
    }
    status = bootstrap.allGather(reached.data(), nranks);
  }
  if (ok(status) && listener >= 0) {
    int expected = 0;
    for (int r = 0; r < nranks; ++r) expected += reached[static_cast<size_t>(r) * nranks + rank];
    for (int served = 0; served < expected;) {
      if (!readable(bootstrap, listener, deadline)) {
        logWarn("rank %d: %d peers never came for a buffer's descriptor", rank, expected - served);
        break;
      }
      int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      uint64_t presented = 0;
      // Anyone on the host can connect to an abstract socket: serve only those who know the token.
      if (readable(bootstrap, client, deadline) &&
          recv(client, &presented, sizeof(presented), MSG_WAITALL) == sizeof(presented) &&
          presented == token) {
        ++served;
        if (!sendFd(client, offeredFd))
          logWarn("rank %d: could not hand a buffer's descriptor to a peer (%s)", rank, strerror(errno));
      }
      close(client);
    }
  }
  for (int r = 0; r < nranks; ++r) {
    if (connections[r] < 0) continue;
    if (ok(status)) (*received)[r] = recvFd(bootstrap, connections[r], deadline);
    close(connections[r]);
  }
  if (listener >= 0) close(listener);
  if (ok(status) && bootstrap.aborted())
    return fail(Status::kRemoteError, "rank %d: aborted while passing a buffer's descriptors", rank);
  return status;
}

}  // namespace mscclpp_nccl
