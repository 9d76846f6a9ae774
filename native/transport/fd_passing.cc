#include "native/transport/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "native/bootstrap/socket.h"
#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

constexpr int kLoggedRefusals = 4;  // a flood of strangers must not flood the log

struct Offer {
  uint8_t name[16];  // random socket name: none to predict and bind first (/proc/net/unix lists it)
  uint64_t token;    // a client proves it is a peer by sending this first
  int32_t pid;       // getpid(): the credentials the socket's peers must show each other
  int32_t offering;  // 1: listening, its descriptor can be fetched
};

// What a client sends on connecting: the offer's token and which rank it is.
struct Hello {
  uint64_t token;
  int32_t rank;
  int32_t reserved;
};

socklen_t socketAddress(const Offer& offer, sockaddr_un* address) {
  memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): nothing to clean up in the file system, but no permissions
  // either, so every connection's credentials are checked.
  char* name = address->sun_path + 1;
  int length = snprintf(name, sizeof(address->sun_path) - 1, "mscclpp-nccl.");
  for (uint8_t byte : offer.name) length += snprintf(name + length, 3, "%02x", byte);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
}

// The process at the other end of a connected unix socket, as the kernel saw it connect (or listen).
bool peerCredentials(int socket, ucred* out) {
  socklen_t length = sizeof(*out);
  return getsockopt(socket, SOL_SOCKET, SO_PEERCRED, out, &length) == 0 && length == sizeof(*out);
}

bool isProcess(const ucred& peer, int32_t pid) { return peer.uid == geteuid() && peer.pid == pid; }

// Waits in short slices until one of `fds` is readable (true), or the deadline or an abort (false),
// so that aborting the bootstrap (ncclCommAbort) ends the wait at once.
bool anyReadable(const Bootstrap& bootstrap, std::vector<pollfd>* fds, Deadline deadline) {
  while (!bootstrap.aborted()) {
    if (secondsLeft(deadline) <= 0) return false;
    for (pollfd& entry : *fds) entry.revents = 0;
    int n = poll(fds->data(), fds->size(), pollSliceMs(deadline));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
  return false;
}

bool readable(const Bootstrap& bootstrap, int fd, Deadline deadline) {
  std::vector<pollfd> entry{pollfd{fd, POLLIN, 0}};
  return anyReadable(bootstrap, &entry, deadline) && (entry[0].revents & POLLIN) != 0;
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
  return sendmsg(socket, &message.header, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

int recvFd(const Bootstrap& bootstrap, int socket, Deadline deadline) {
  if (!readable(bootstrap, socket, deadline)) return -1;
  FdMessage message;
  if (recvmsg(socket, &message.header, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) != 1) return -1;
  cmsghdr* rights = CMSG_FIRSTHDR(&message.header);
  if (rights == nullptr || rights->cmsg_level != SOL_SOCKET || rights->cmsg_type != SCM_RIGHTS) return -1;
  int fd = -1;
  memcpy(&fd, CMSG_DATA(rights), sizeof(int));
  return fd;
}

int listenOn(const Offer& offer, int backlog) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address;
  socklen_t length = socketAddress(offer, &address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, backlog) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Connecting to a listening unix socket completes without the peer accepting (up to its backlog). The
// socket is non-blocking, so a backlog that strangers filled fails here rather than stalling.
int connectTo(const Offer& offer, int rank) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address;
  socklen_t length = socketAddress(offer, &address);
  const Hello hello{offer.token, rank, 0};
  ucred server{};
  // Whoever listens must be the offering process, or it could hand us a descriptor of its choosing.
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || !peerCredentials(fd, &server) ||
      !isProcess(server, offer.pid) || send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
    close(fd);
    return -1;
  }
  return fd;
}

// A connection accepted by the server, waiting for its Hello.
struct Client {
  int fd;
  ucred credentials;
  Hello hello;
  size_t got;
};

// Serves `offeredFd` to every rank that said it reached this one (`comes[r]`), and to no one else: each
// connection must come from our uid and from the process that rank announced, and present the token.
// Connections are accepted and read without blocking, so a stranger delays no one.
void serve(const Bootstrap& bootstrap, const std::vector<Offer>& offers, std::vector<uint8_t> comes,
           int listener, int offeredFd, Deadline deadline) {
  const int rank = bootstrap.rank(), nranks = bootstrap.size();
  int expected = static_cast<int>(std::count(comes.begin(), comes.end(), 1));
  int refused = 0;
  auto refuse = [&](const Client& client, const char* why) {
    if (refused++ < kLoggedRefusals)
      logWarn("rank %d: refused a connection from pid %d (uid %u) to its descriptor socket: %s", rank,
              static_cast<int>(client.credentials.pid), static_cast<unsigned>(client.credentials.uid), why);
    close(client.fd);
  };
  std::vector<Client> clients;
  std::vector<pollfd> polled;
  while (expected > 0) {
    polled.assign(1, pollfd{listener, POLLIN, 0});
    for (const Client& c : clients) polled.push_back(pollfd{c.fd, POLLIN, 0});
    if (!anyReadable(bootstrap, &polled, deadline)) {
      if (!bootstrap.aborted())
        logWarn("rank %d: %d peers never came for a buffer's descriptor", rank, expected);
      break;
    }
    // Read first: accepting appends to `clients`, whose indices match `polled` until then.
    for (size_t i = clients.size(); i-- > 0;) {
      if (polled[i + 1].revents == 0) continue;
      Client& c = clients[i];
      long n = readSome(c.fd, reinterpret_cast<char*>(&c.hello) + c.got, sizeof(c.hello) - c.got);
      if (n == 0) continue;
      if (n > 0) c.got += static_cast<size_t>(n);
      if (n > 0 && c.got < sizeof(c.hello)) continue;
      const int from = c.hello.rank;
      const bool valid = n > 0 && c.hello.token == offers[rank].token && from >= 0 && from < nranks &&
                         comes[from] && isProcess(c.credentials, offers[from].pid);
      if (!valid) {
        refuse(c, "not the rank it claims");
      } else {
        comes[from] = 0;
        --expected;
        if (!sendFd(c.fd, offeredFd))
          logWarn("rank %d: could not hand a buffer's descriptor to a peer (%s)", rank, strerror(errno));
        close(c.fd);
      }
      clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if ((polled[0].revents & POLLIN) == 0) continue;
    for (;;) {
      Client c{accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC), ucred{}, Hello{}, 0};
      if (c.fd < 0) break;  // none left (or a transient error: poll again)
      // Checked before reading anything: a stranger is dropped at once, whatever it sends or withholds.
      bool known = false;
      if (peerCredentials(c.fd, &c.credentials))
        for (int r = 0; r < nranks && !known; ++r)
          known = comes[r] && isProcess(c.credentials, offers[r].pid);
      if (known && clients.size() < static_cast<size_t>(nranks))
        clients.push_back(c);
      else
        refuse(c, c.credentials.uid != geteuid() ? "another user" : "a process no rank announced");
    }
  }
  for (const Client& c : clients) close(c.fd);
  if (refused > kLoggedRefusals) logWarn("rank %d: refused %d connections in all", rank, refused);
}

}  // namespace

Status exchangeFds(Bootstrap& bootstrap, const Topology& topology, int offeredFd,
                   std::vector<int>* received) {
  const int rank = bootstrap.rank(), nranks = bootstrap.size();
  const Deadline deadline = deadlineAfter(bootstrapTimeoutSeconds());
  received->assign(nranks, -1);
  auto remote = [&](int r) { return r != rank && !topology.sameProcess(rank, r); };

  std::vector<Offer> offers(nranks);
  Offer& mine = offers[rank];
  mine.pid = static_cast<int32_t>(getpid());
  const bool named =
      ok(randomBytes(mine.name, sizeof(mine.name))) && ok(randomBytes(&mine.token, sizeof(mine.token)));
  int listener = offeredFd >= 0 && named ? listenOn(mine, nranks) : -1;
  mine.offering = listener >= 0 ? 1 : 0;
  // The bootstrap is authenticated by the unique id's secret: what it carries (pids, names, tokens) is
  // from the peers themselves.
  Status status = bootstrap.allGather(offers.data(), sizeof(Offer));

  // Connect to every offer first, say who reached whom, then serve and receive: no order can deadlock.
  std::vector<int> connections(nranks, -1);
  std::vector<uint8_t> reached(static_cast<size_t>(nranks) * nranks, 0);
  if (ok(status)) {
    for (int r = 0; r < nranks; ++r) {
      if (!remote(r) || !offers[r].offering) continue;
      connections[r] = connectTo(offers[r], rank);
      reached[static_cast<size_t>(rank) * nranks + r] = connections[r] >= 0;
    }
    status = bootstrap.allGather(reached.data(), nranks);
  }
  if (ok(status) && listener >= 0) {
    std::vector<uint8_t> comes(nranks);
    for (int r = 0; r < nranks; ++r) comes[r] = reached[static_cast<size_t>(r) * nranks + rank];
    serve(bootstrap, offers, std::move(comes), listener, offeredFd, deadline);
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
