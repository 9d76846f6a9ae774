#include "native/transport/fd_passing.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "native/bootstrap/socket.h"
#include "native/common/logging.h"
#include "native/common/threads.h"
#include "native/transport/unix_socket.h"

namespace mscclpp_nccl {
namespace {

constexpr int kLoggedRefusals = 4;  // a flood of strangers must not flood the log
// How long a rank keeps retrying a peer's socket whose backlog strangers filled. The server drains its
// backlog meanwhile, so a stranger can delay zero-copy by this much at most, never turn it off quietly.
constexpr double kConnectRetrySeconds = 10.0;

struct Offer {
  UnixSocketName name;
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

// A connection accepted by the server, waiting for its Hello.
struct Client {
  int fd;
  ucred credentials;
  Hello hello;
  size_t got;
};

// What the server learns while it runs: which ranks will come (known once they said whom they
// reached), or that it should stop.
struct ServeControl {
  std::mutex mutex;
  bool known = false, stop = false;
  std::vector<uint8_t> comes;
  int wake = -1;  // eventfd, written when the above changes
};

void tell(ServeControl* control, bool stop, std::vector<uint8_t> comes) {
  {
    std::lock_guard<std::mutex> lock(control->mutex);
    control->stop = stop;
    control->comes = std::move(comes);
    control->known = true;
  }
  const uint64_t one = 1;
  if (control->wake >= 0 && write(control->wake, &one, sizeof(one)) < 0) {
    // The eventfd's counter cannot overflow on one write; the server also polls in slices.
  }
}

// Serves `offeredFd` to every rank that presents its token from the process it announced, and to no one
// else, from the moment the offers are known, so that strangers filling the backlog are drained while
// peers connect. Ends once every rank that said it reached this one was served (or at the deadline, an
// abort, or `stop`). Connections are accepted and read without blocking, so a stranger delays no one.
void serve(const Bootstrap& bootstrap, const std::vector<Offer>& offers, ServeControl* control, int listener,
           int offeredFd, Deadline deadline) {
  const int rank = bootstrap.rank(), nranks = bootstrap.size();
  std::vector<uint8_t> served(nranks, 0);
  int refused = 0;
  auto refuse = [&](const Client& client, const char* why) {
    if (refused++ < kLoggedRefusals)
      logWarn("rank %d: refused a connection from pid %d (uid %u) to its descriptor socket: %s", rank,
              static_cast<int>(client.credentials.pid), static_cast<unsigned>(client.credentials.uid), why);
    close(client.fd);
  };
  // A peer yet to be served: another process than this one (ranks of this process never connect).
  auto awaited = [&](int r) { return r != rank && !served[r] && offers[r].pid != offers[rank].pid; };
  std::vector<Client> clients;
  std::vector<pollfd> polled;
  for (;;) {
    int expected = -1;  // unknown until the ranks say whom they reached
    {
      std::lock_guard<std::mutex> lock(control->mutex);
      if (control->stop) break;
      if (control->known) {
        expected = 0;
        for (int r = 0; r < nranks; ++r) expected += control->comes[r] && !served[r];
      }
    }
    if (expected == 0) break;
    polled.assign(1, pollfd{listener, POLLIN, 0});
    polled.push_back(pollfd{control->wake, POLLIN, 0});
    for (const Client& c : clients) polled.push_back(pollfd{c.fd, POLLIN, 0});
    if (!waitAnyReadable(&polled, deadline, [&] { return bootstrap.aborted(); })) {
      if (!bootstrap.aborted())
        logWarn("rank %d: %d peers never came for a buffer's descriptor", rank,
                expected < 0 ? nranks - 1 : expected);
      break;
    }
    if (polled[1].revents != 0) {
      uint64_t count;
      if (read(control->wake, &count, sizeof(count)) < 0) {
        // Nothing to drain: the state is read under the mutex above.
      }
    }
    // Read first: accepting appends to `clients`, whose indices match `polled` until then.
    for (size_t i = clients.size(); i-- > 0;) {
      if (polled[i + 2].revents == 0) continue;
      Client& c = clients[i];
      long n = readSome(c.fd, reinterpret_cast<char*>(&c.hello) + c.got, sizeof(c.hello) - c.got);
      if (n == 0) continue;
      if (n > 0) c.got += static_cast<size_t>(n);
      if (n > 0 && c.got < sizeof(c.hello)) continue;
      const int from = c.hello.rank;
      const bool valid = n > 0 && c.hello.token == offers[rank].token && from >= 0 && from < nranks &&
                         awaited(from) && isOurProcess(c.credentials, offers[from].pid);
      if (!valid) {
        refuse(c, "not the rank it claims");
      } else {
        served[from] = 1;
        if (!sendDescriptor(c.fd, offeredFd))
          logWarn("rank %d: could not hand a buffer's descriptor to rank %d (%s)", rank, from,
                  strerror(errno));
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
          known = awaited(r) && isOurProcess(c.credentials, offers[r].pid);
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
  const std::function<bool()> aborted = [&] { return bootstrap.aborted(); };

  std::vector<Offer> offers(nranks);
  Offer& mine = offers[rank];
  mine.pid = static_cast<int32_t>(getpid());
  const bool named = ok(newUnixSocketName(&mine.name)) && ok(randomBytes(&mine.token, sizeof(mine.token)));
  int listener = offeredFd >= 0 && named ? listenOnUnixSocket(mine.name) : -1;
  mine.offering = listener >= 0 ? 1 : 0;
  // The bootstrap is authenticated by the unique id's secret: what it carries (pids, names, tokens) is
  // from the peers themselves.
  Status status = bootstrap.allGather(offers.data(), sizeof(Offer));

  // The server runs from now on, on a thread of its own, so that it drains what strangers put in its
  // backlog while the peers connect (they retry when it is full) and while this thread waits below.
  // Without a thread it serves after the second round, as the only one then to be drained.
  ServeControl control;
  std::thread server;
  const bool serving = ok(status) && listener >= 0;
  bool threaded = false;
  if (serving) {
    control.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    threaded = control.wake >= 0 &&
               ok(startThread(
                   &server, [&] { serve(bootstrap, offers, &control, listener, offeredFd, deadline); },
                   "descriptor passing"));
    if (!threaded)
      logWarn("rank %d: descriptor socket served only after every rank connected: strangers may fill it",
              rank);
  }

  // Connect to every offer first, say who reached whom, then receive: no order can deadlock.
  std::vector<int> connections(nranks, -1);
  std::vector<uint8_t> reached(static_cast<size_t>(nranks) * nranks, 0);
  if (ok(status)) {
    // Half the rendezvous timeout at most: the round below must still fit in what is left.
    const double retry = std::min(kConnectRetrySeconds, bootstrapTimeoutSeconds() / 2);
    const Deadline connectDeadline = std::min(deadline, deadlineAfter(retry));
    for (int r = 0; r < nranks; ++r) {
      if (!remote(r) || !offers[r].offering) continue;
      std::string why;
      const Hello hello{offers[r].token, rank, 0};
      connections[r] = connectToProcess(offers[r].name, offers[r].pid, &hello, sizeof(hello), connectDeadline,
                                        aborted, &why);
      reached[static_cast<size_t>(rank) * nranks + r] = connections[r] >= 0;
      if (connections[r] < 0 && !bootstrap.aborted())
        logWarn(
            "rank %d: cannot reach rank %d's descriptor socket (%s): buffers shared with it copy through "
            "scratch",
            rank, r, why.c_str());
    }
    status = bootstrap.allGather(reached.data(), nranks);
  }
  if (serving) {
    std::vector<uint8_t> comes(nranks);
    for (int r = 0; r < nranks; ++r) comes[r] = reached[static_cast<size_t>(r) * nranks + rank];
    tell(&control, !ok(status), std::move(comes));
    if (threaded)
      joinThread(&server);
    else if (ok(status))
      serve(bootstrap, offers, &control, listener, offeredFd, deadline);
  }
  for (int r = 0; r < nranks; ++r) {
    if (connections[r] < 0) continue;
    if (ok(status)) {
      (*received)[r] = recvDescriptor(connections[r], deadline, aborted);
      if ((*received)[r] < 0 && !bootstrap.aborted())
        logWarn(
            "rank %d: rank %d sent no descriptor for a buffer: buffers shared with it copy through scratch",
            rank, r);
    }
    close(connections[r]);
  }
  if (control.wake >= 0) close(control.wake);
  if (listener >= 0) close(listener);
  if (ok(status) && bootstrap.aborted())
    return fail(Status::kRemoteError, "rank %d: aborted while passing a buffer's descriptors", rank);
  return status;
}

}  // namespace mscclpp_nccl
