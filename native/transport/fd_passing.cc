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
class FdServer {
 public:
  FdServer(const Bootstrap& bootstrap, const std::vector<Offer>& offers, int listener, int offeredFd)
      : bootstrap_(bootstrap),
        offers_(offers),
        rank_(bootstrap.rank()),
        nranks_(bootstrap.size()),
        listener_(listener),
        offeredFd_(offeredFd),
        served_(nranks_, 0) {}

  void run(ServeControl* control, Deadline deadline) {
    std::vector<pollfd> polled;
    for (;;) {
      const int expected = stillExpected(control);
      if (expected == 0) break;
      polled.assign(1, pollfd{listener_, POLLIN, 0});
      polled.push_back(pollfd{control->wake, POLLIN, 0});
      for (const Client& c : clients_) polled.push_back(pollfd{c.fd, POLLIN, 0});
      if (!waitAnyReadable(&polled, deadline, [&] { return bootstrap_.aborted(); })) {
        if (!bootstrap_.aborted())
          logWarn("rank %d: %d peers never came for a buffer's descriptor", rank_,
                  expected < 0 ? nranks_ - 1 : expected);
        break;
      }
      if (polled[1].revents != 0) {
        uint64_t count;
        if (read(control->wake, &count, sizeof(count)) < 0) {
          // Nothing to drain: the state is read under the mutex in stillExpected.
        }
      }
      // Read first: accepting appends to `clients_`, whose indices match `polled` until then.
      answerReadable(polled);
      if (polled[0].revents & POLLIN) acceptWaiting();
    }
    for (const Client& c : clients_) close(c.fd);
    if (refused_ > kLoggedRefusals) logWarn("rank %d: refused %d connections in all", rank_, refused_);
  }

 private:
  // Ranks still to be served; -1 until the ranks say whom they reached, 0 also when told to stop.
  int stillExpected(ServeControl* control) const {
    std::lock_guard<std::mutex> lock(control->mutex);
    if (control->stop) return 0;
    if (!control->known) return -1;
    int expected = 0;
    for (int r = 0; r < nranks_; ++r) expected += control->comes[r] && !served_[r];
    return expected;
  }

  // A peer yet to be served: another process than this one (ranks of this process never connect).
  bool awaited(int r) const { return r != rank_ && !served_[r] && offers_[r].pid != offers_[rank_].pid; }

  void refuse(const Client& client, const char* why) {
    if (refused_++ < kLoggedRefusals)
      logWarn("rank %d: refused a connection from pid %d (uid %u) to its descriptor socket: %s", rank_,
              static_cast<int>(client.credentials.pid), static_cast<unsigned>(client.credentials.uid), why);
    close(client.fd);
  }

  // Reads the Hellos that arrived and hands the descriptor to each client that proved to be its rank.
  void answerReadable(const std::vector<pollfd>& polled) {
    for (size_t i = clients_.size(); i-- > 0;) {
      if (polled[i + 2].revents == 0) continue;
      Client& c = clients_[i];
      long n = readSome(c.fd, reinterpret_cast<char*>(&c.hello) + c.got, sizeof(c.hello) - c.got);
      if (n == 0) continue;
      if (n > 0) c.got += static_cast<size_t>(n);
      if (n > 0 && c.got < sizeof(c.hello)) continue;
      const int from = c.hello.rank;
      const bool valid = n > 0 && c.hello.token == offers_[rank_].token && from >= 0 && from < nranks_ &&
                         awaited(from) && isOurProcess(c.credentials, offers_[from].pid);
      if (!valid) {
        refuse(c, "not the rank it claims");
      } else {
        served_[from] = 1;
        if (!sendDescriptor(c.fd, offeredFd_))
          logWarn("rank %d: could not hand a buffer's descriptor to rank %d (%s)", rank_, from,
                  strerror(errno));
        close(c.fd);
      }
      clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  // Accepts every waiting connection; one from a process no awaited rank announced is dropped at once,
  // before anything is read from it, whatever it sends or withholds.
  void acceptWaiting() {
    for (;;) {
      Client c{accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC), ucred{}, Hello{}, 0};
      if (c.fd < 0) break;  // none left (or a transient error: poll again)
      bool known = false;
      if (peerCredentials(c.fd, &c.credentials))
        for (int r = 0; r < nranks_ && !known; ++r)
          known = awaited(r) && isOurProcess(c.credentials, offers_[r].pid);
      if (known && clients_.size() < static_cast<size_t>(nranks_))
        clients_.push_back(c);
      else
        refuse(c, c.credentials.uid != geteuid() ? "another user" : "a process no rank announced");
    }
  }

  const Bootstrap& bootstrap_;
  const std::vector<Offer>& offers_;
  const int rank_, nranks_;
  const int listener_, offeredFd_;
  std::vector<uint8_t> served_;
  std::vector<Client> clients_;
  int refused_ = 0;
};

void serve(const Bootstrap& bootstrap, const std::vector<Offer>& offers, ServeControl* control, int listener,
           int offeredFd, Deadline deadline) {
  FdServer(bootstrap, offers, listener, offeredFd).run(control, deadline);
}

// Connects to every remote rank's offer (within `deadline`) and records in row `rank` of `reached`
// which succeeded; connections[r] is -1 where none was made.
void connectToOffers(Bootstrap& bootstrap, const Topology& topology, const std::vector<Offer>& offers,
                     Deadline deadline, std::vector<int>* connections, std::vector<uint8_t>* reached) {
  const int rank = bootstrap.rank(), nranks = bootstrap.size();
  const std::function<bool()> aborted = [&] { return bootstrap.aborted(); };
  for (int r = 0; r < nranks; ++r) {
    if (r == rank || topology.sameProcess(rank, r) || !offers[r].offering) continue;
    std::string why;
    const Hello hello{offers[r].token, rank, 0};
    (*connections)[r] =
        connectToProcess(offers[r].name, offers[r].pid, &hello, sizeof(hello), deadline, aborted, &why);
    (*reached)[static_cast<size_t>(rank) * nranks + r] = (*connections)[r] >= 0;
    if ((*connections)[r] < 0 && !bootstrap.aborted())
      logWarn(
          "rank %d: cannot reach rank %d's descriptor socket (%s): buffers shared with it copy through "
          "scratch",
          rank, r, why.c_str());
  }
}

// Takes each peer's descriptor from its connection (when `take`) and closes the connections.
void receiveFds(const Bootstrap& bootstrap, bool take, Deadline deadline, std::vector<int>* connections,
                std::vector<int>* received) {
  const std::function<bool()> aborted = [&] { return bootstrap.aborted(); };
  for (size_t r = 0; r < connections->size(); ++r) {
    const int connection = (*connections)[r];
    if (connection < 0) continue;
    if (take) {
      (*received)[r] = recvDescriptor(connection, deadline, aborted);
      if ((*received)[r] < 0 && !bootstrap.aborted())
        logWarn(
            "rank %d: rank %zu sent no descriptor for a buffer: buffers shared with it copy through scratch",
            bootstrap.rank(), r);
    }
    close(connection);
  }
}

}  // namespace

Status exchangeFds(Bootstrap& bootstrap, const Topology& topology, int offeredFd,
                   std::vector<int>* received) {
  const int rank = bootstrap.rank(), nranks = bootstrap.size();
  const Deadline deadline = deadlineAfter(bootstrapTimeoutSeconds());
  received->assign(nranks, -1);

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
                   "descriptor passing", "FdPassing"));
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
    connectToOffers(bootstrap, topology, offers, std::min(deadline, deadlineAfter(retry)), &connections,
                    &reached);
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
  receiveFds(bootstrap, ok(status), deadline, &connections, received);
  if (control.wake >= 0) close(control.wake);
  if (listener >= 0) close(listener);
  if (ok(status) && bootstrap.aborted())
    return fail(Status::kRemoteError, "rank %d: aborted while passing a buffer's descriptors", rank);
  return status;
}

}  // namespace mscclpp_nccl
