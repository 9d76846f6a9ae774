#include "native/transport/descriptor_server.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "native/common/logging.h"
#include "native/common/threads.h"

namespace mscclpp_nccl {
namespace {

constexpr int kLoggedRefusals = 4;     // a flood of strangers must not flood the log
constexpr int kMaxClients = 64;        // connections whose token is still awaited
constexpr double kHelloSeconds = 2.0;  // a connection that sends no token by then is dropped
constexpr int kPollMs = 100;

struct Hello {
  uint64_t token;
};

class DescriptorServer {
 public:
  static Status get(DescriptorServer** out) {
    static std::mutex startMutex;
    static DescriptorServer* server = nullptr;  // never destroyed: its thread serves until exit
    std::lock_guard<std::mutex> lock(startMutex);
    if (server == nullptr) {
      std::unique_ptr<DescriptorServer> fresh(new DescriptorServer());
      MSCCLPP_TRY(fresh->start());
      server = fresh.release();
    }
    *out = server;
    return Status::kSuccess;
  }

  Status offer(int fd, const std::vector<int32_t>& pids, DescriptorOffer* out) {
    Offered offered;
    offered.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (offered.fd < 0)
      return fail(Status::kSystemError, "cannot duplicate a descriptor: %s", strerror(errno));
    offered.pids = pids;
    DescriptorOffer description{};
    description.server = name_;
    description.pid = static_cast<int32_t>(getpid());
    Status status = randomBytes(&description.token, sizeof(description.token));
    if (!ok(status)) {
      close(offered.fd);
      return status;
    }
    std::lock_guard<std::mutex> lock(mu_);
    offers_[description.token] = std::move(offered);
    *out = description;
    return Status::kSuccess;
  }

  void withdraw(uint64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = offers_.find(token);
    if (it == offers_.end()) return;
    close(it->second.fd);
    offers_.erase(it);
  }

  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return offers_.size();
  }

 private:
  struct Offered {
    int fd = -1;
    std::vector<int32_t> pids;  // processes yet to fetch it
  };
  struct Client {
    int fd;
    ucred credentials;
    Hello hello;
    size_t got;
    Deadline deadline;
  };

  Status start() {
    MSCCLPP_TRY(newUnixSocketName(&name_));
    listener_ = listenOnUnixSocket(name_);
    if (listener_ < 0)
      return fail(Status::kSystemError, "cannot listen on a descriptor socket: %s", strerror(errno));
    Status status = startThread(&thread_, [this] { serve(); }, "descriptor server", "Descriptors");
    if (!ok(status)) {
      close(listener_);
      return status;
    }
    thread_.detach();
    return Status::kSuccess;
  }

  // Whether a connection from `peer` may be for some offer.
  bool expected(const ucred& peer) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& entry : offers_)
      for (int32_t pid : entry.second.pids)
        if (isOurProcess(peer, pid)) return true;
    return false;
  }

  void refuse(const Client& client, const char* why) {
    if (refused_++ < kLoggedRefusals)
      logWarn("refused a connection from pid %d (uid %u) to the descriptor socket: %s",
              static_cast<int>(client.credentials.pid), static_cast<unsigned>(client.credentials.uid), why);
    close(client.fd);
  }

  // Hands the offer named by the client's token to it, once per process.
  void answer(const Client& client) {
    int fd = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = offers_.find(client.hello.token);
      if (it != offers_.end()) {
        std::vector<int32_t>& pids = it->second.pids;
        auto pid = std::find_if(pids.begin(), pids.end(),
                                [&](int32_t p) { return isOurProcess(client.credentials, p); });
        if (pid != pids.end()) {
          pids.erase(pid);
          fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
          if (pids.empty()) {  // every peer has it
            close(it->second.fd);
            offers_.erase(it);
          }
        }
      }
    }
    if (fd < 0) {
      refuse(client, "no offer for it under that token");
      return;
    }
    if (!sendDescriptor(client.fd, fd))
      logWarn("could not hand a descriptor to pid %d: %s", static_cast<int>(client.credentials.pid),
              strerror(errno));
    close(fd);
    close(client.fd);
  }

  void serve() {
    std::vector<Client> clients;
    std::vector<pollfd> polled;
    for (;;) {
      polled.assign(1, pollfd{listener_, POLLIN, 0});
      for (const Client& c : clients) polled.push_back(pollfd{c.fd, POLLIN, 0});
      if (poll(polled.data(), polled.size(), kPollMs) < 0 && errno != EINTR) return;
      // Read first: accepting appends to `clients`, whose indices match `polled` until then.
      for (size_t i = clients.size(); i-- > 0;) {
        Client& c = clients[i];
        bool done = false;
        if (polled[i + 1].revents != 0) {
          long n = readSome(c.fd, reinterpret_cast<char*>(&c.hello) + c.got, sizeof(c.hello) - c.got);
          if (n > 0) c.got += static_cast<size_t>(n);
          if (c.got == sizeof(c.hello)) {
            answer(c);
            done = true;
          } else if (n < 0) {
            close(c.fd);  // hung up
            done = true;
          }
        }
        if (!done && secondsLeft(c.deadline) <= 0) {
          refuse(c, "sent no token in time");
          done = true;
        }
        if (done) clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if ((polled[0].revents & POLLIN) == 0) continue;
      for (;;) {
        Client c{accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC), ucred{}, Hello{}, 0,
                 deadlineAfter(kHelloSeconds)};
        if (c.fd < 0) break;
        // Checked before reading anything: a stranger is dropped at once.
        const bool known = peerCredentials(c.fd, &c.credentials) && expected(c.credentials);
        if (known && clients.size() < static_cast<size_t>(kMaxClients))
          clients.push_back(c);
        else
          refuse(c, c.credentials.uid != geteuid() ? "another user" : "a process no offer names");
      }
    }
  }

  UnixSocketName name_{};
  int listener_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::map<uint64_t, Offered> offers_;
  int refused_ = 0;  // server thread only
};

}  // namespace

Status offerDescriptor(int fd, const std::vector<int32_t>& pids, DescriptorOffer* out) {
  DescriptorServer* server = nullptr;
  MSCCLPP_TRY(DescriptorServer::get(&server));
  return server->offer(fd, pids, out);
}

void withdrawDescriptor(uint64_t token) {
  DescriptorServer* server = nullptr;
  if (ok(DescriptorServer::get(&server))) server->withdraw(token);
}

size_t heldDescriptorOffers() {
  DescriptorServer* server = nullptr;
  return ok(DescriptorServer::get(&server)) ? server->held() : 0;
}

int fetchDescriptor(const DescriptorOffer& offer, Deadline deadline, const std::function<bool()>& aborted,
                    std::string* why) {
  const Hello hello{offer.token};
  int socket = connectToProcess(offer.server, offer.pid, &hello, sizeof(hello), deadline, aborted, why);
  if (socket < 0) return -1;
  int fd = recvDescriptor(socket, deadline, aborted);
  close(socket);
  if (fd < 0) *why = "the owner sent no descriptor";
  return fd;
}

}  // namespace mscclpp_nccl
