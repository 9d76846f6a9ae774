#include "native/bootstrap/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "native/common/logging.h"
#include "native/common/parameters.h"

namespace mscclpp_nccl {
namespace {

// Blocking helpers wake at least this often to notice an abort flag.
constexpr int kPollSliceMs = 50;

}  // namespace

int pollSliceMs(Deadline deadline) {
  double left = secondsLeft(deadline) * 1000.0;
  return static_cast<int>(std::min<double>(left + 1.0, kPollSliceMs));
}

namespace {

bool aborted(const std::atomic<bool>* flag) { return flag && flag->load(); }

// NCCL_SOCKET_FAMILY: AF_INET or AF_INET6 restricts the family; anything else leaves it open.
int familyFromEnv() {
  std::string family = readText(Param::kSocketFamily);
  if (family == "AF_INET") return AF_INET;
  if (family == "AF_INET6") return AF_INET6;
  if (!family.empty())
    logWarn("ignoring NCCL_SOCKET_FAMILY=%s: expected AF_INET or AF_INET6", family.c_str());
  return AF_UNSPEC;
}

// NCCL_SOCKET_IFNAME syntax: optional '^' (exclude), optional '=' (exact names), then a comma list of
// name prefixes.
struct InterfaceFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  explicit InterfaceFilter(std::string spec) {
    if (!spec.empty() && spec[0] == '^') exclude = true, spec.erase(0, 1);
    if (!spec.empty() && spec[0] == '=') exact = true, spec.erase(0, 1);
    size_t start = 0;
    while (start <= spec.size()) {
      size_t comma = spec.find(',', start);
      if (comma == std::string::npos) comma = spec.size();
      if (comma > start) names.push_back(spec.substr(start, comma - start));
      start = comma + 1;
    }
  }
  bool accepts(const std::string& ifName) const {
    bool listed = false;
    for (const std::string& name : names)
      listed |= exact ? ifName == name : ifName.compare(0, name.size(), name) == 0;
    return listed != exclude;
  }
};

bool hasPrefix(const char* text, const char* prefix) { return strncmp(text, prefix, strlen(prefix)) == 0; }

bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
         err == ECONNRESET || err == EAGAIN || err == ECONNABORTED || err == EINTR;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // bootstrap frames are small
}

}  // namespace

Deadline deadlineAfter(double seconds) {
  seconds = std::min(std::max(seconds, 0.0), 1e8);  // keeps the duration arithmetic in range
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double secondsLeft(Deadline deadline) {
  double left = std::chrono::duration<double>(deadline - Clock::now()).count();
  return left > 0 ? left : 0;
}

socklen_t addressLength(const SocketAddress& addr) {
  return addr.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

bool isValidAddress(const SocketAddress& addr) {
  return addr.sa.sa_family == AF_INET || addr.sa.sa_family == AF_INET6;
}

std::string addressToString(const SocketAddress& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &addr.v4.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(addr.v4.sin_port));
  }
  if (addr.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &addr.v6.sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(addr.v6.sin6_port));
  }
  return "<invalid address>";
}

bool isLoopback(const SocketAddress& addr) {
  if (addr.sa.sa_family == AF_INET) return (ntohl(addr.v4.sin_addr.s_addr) >> 24) == 127;
  if (addr.sa.sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&addr.v6.sin6_addr);
  return false;
}

SocketAddress loopbackAddress(int family) {
  SocketAddress addr;
  memset(&addr, 0, sizeof(addr));
  if (family == AF_INET6) {
    addr.v6.sin6_family = AF_INET6;
    addr.v6.sin6_addr = in6addr_loopback;
  } else {
    addr.v4.sin_family = AF_INET;
    addr.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  return addr;
}

Status parseAddress(const std::string& text, SocketAddress* out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return fail(Status::kInvalidArgument, "bad address '%s': expected [ipv6]:port", text.c_str());
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon)
      return fail(Status::kInvalidArgument, "bad address '%s': expected host:port or [ipv6]:port",
                  text.c_str());
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long portNum = strtol(port.c_str(), &end, 10);
  if (host.empty() || port.empty() || *end != '\0' || portNum <= 0 || portNum > 65535)
    return fail(Status::kInvalidArgument, "bad address '%s': expected host:port with port 1-65535",
                text.c_str());

  addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = familyFromEnv();
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || !result)
    return fail(Status::kInvalidArgument, "cannot resolve '%s': %s", host.c_str(), gai_strerror(rc));
  bool found = false;
  for (addrinfo* ai = result; ai; ai = ai->ai_next) {
    if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) || ai->ai_addrlen > sizeof(SocketAddress))
      continue;
    memset(out, 0, sizeof(*out));
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    if (ai->ai_family == AF_INET)
      out->v4.sin_port = htons(static_cast<uint16_t>(portNum));
    else
      out->v6.sin6_port = htons(static_cast<uint16_t>(portNum));
    found = true;
    break;
  }
  freeaddrinfo(result);
  if (!found) return fail(Status::kInvalidArgument, "'%s' has no IPv4 or IPv6 address", host.c_str());
  return Status::kSuccess;
}

Status selectInterfaceAddress(SocketAddress* out, std::string* ifName) {
  const int family = familyFromEnv();
  const std::string spec = readText(Param::kSocketIfname);
  const InterfaceFilter filter(spec);

  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) list = nullptr;
  // IPv4 is preferred when the family is open: it needs no scope and is what most clusters route.
  const ifaddrs* best = nullptr;
  for (const ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    int fam = ifa->ifa_addr->sa_family;
    if ((fam != AF_INET && fam != AF_INET6) || (family != AF_UNSPEC && fam != family)) continue;
    // Link-local IPv6 needs a scope id to be reachable, which peers on other hosts cannot use.
    if (fam == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr))
      continue;
    if (spec.empty()) {
      if ((ifa->ifa_flags & IFF_LOOPBACK) || hasPrefix(ifa->ifa_name, "lo") ||
          hasPrefix(ifa->ifa_name, "docker"))
        continue;
    } else if (!filter.accepts(ifa->ifa_name)) {
      continue;
    }
    if (!best || (best->ifa_addr->sa_family == AF_INET6 && fam == AF_INET)) best = ifa;
  }

  Status status = Status::kSuccess;
  if (best) {
    memset(out, 0, sizeof(*out));
    memcpy(out, best->ifa_addr,
           best->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    if (ifName) *ifName = best->ifa_name;
  } else if (spec.empty()) {
    *out = loopbackAddress(family == AF_INET6 ? AF_INET6 : AF_INET);  // a single-host setup
    if (ifName) *ifName = "lo";
  } else {
    status = fail(Status::kSystemError, "no usable network interface matches NCCL_SOCKET_IFNAME=%s%s%s",
                  spec.c_str(), family == AF_UNSPEC ? "" : " and NCCL_SOCKET_FAMILY=",
                  family == AF_UNSPEC ? "" : readText(Param::kSocketFamily).c_str());
  }
  if (list) freeifaddrs(list);
  return status;
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status listenSocket(const SocketAddress& addr, Socket* out, SocketAddress* bound) {
  Socket sock(::socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return fail(Status::kSystemError, "socket(): %s", strerror(errno));
  int one = 1;
  // A fixed port (NCCL_COMM_ID) must be reusable right after the previous rendezvous closed it.
  setsockopt(sock.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(sock.fd(), &addr.sa, addressLength(addr)) != 0)
    return fail(Status::kSystemError, "cannot bind to %s: %s", addressToString(addr).c_str(),
                strerror(errno));
  if (listen(sock.fd(), 16384) != 0)
    return fail(Status::kSystemError, "listen on %s: %s", addressToString(addr).c_str(), strerror(errno));
  SocketAddress actual;
  memset(&actual, 0, sizeof(actual));
  socklen_t len = sizeof(actual);
  if (getsockname(sock.fd(), &actual.sa, &len) != 0)
    return fail(Status::kSystemError, "getsockname: %s", strerror(errno));
  *bound = actual;
  *out = std::move(sock);
  return Status::kSuccess;
}

Status acceptSocket(const Socket& listener, Socket* out) {
  out->close();
  int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    setNoDelay(fd);
    *out = Socket(fd);
    return Status::kSuccess;
  }
  // A connection that died in the backlog is not the listener's failure.
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
    return Status::kSuccess;
  return fail(Status::kSystemError, "accept: %s", strerror(errno));
}

Status connectSocket(const SocketAddress& addr, Deadline deadline, const std::atomic<bool>* abortFlag,
                     Socket* out) {
  int lastErr = 0;
  int backoffMs = 10;
  for (;;) {
    if (aborted(abortFlag)) return fail(Status::kRemoteError, "bootstrap aborted");
    Socket sock(::socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!sock.valid()) return fail(Status::kSystemError, "socket(): %s", strerror(errno));
    int err = 0;
    if (connect(sock.fd(), &addr.sa, addressLength(addr)) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        err = ETIMEDOUT;
        while (!aborted(abortFlag) && Clock::now() < deadline) {
          pollfd pfd = {sock.fd(), POLLOUT, 0};
          int n = poll(&pfd, 1, pollSliceMs(deadline));
          if (n > 0) {
            socklen_t len = sizeof(err);
            if (getsockopt(sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
            break;
          }
        }
      }
    }
    if (err == 0) {
      setNoDelay(sock.fd());
      *out = std::move(sock);
      return Status::kSuccess;
    }
    lastErr = err;
    if (!retryableConnectError(err))
      return fail(Status::kSystemError, "cannot connect to %s: %s", addressToString(addr).c_str(),
                  strerror(err));
    // Sleep before retrying, in slices so that abort and the deadline are honoured.
    Deadline wake = std::min(deadline, Clock::now() + std::chrono::milliseconds(backoffMs));
    while (!aborted(abortFlag) && Clock::now() < wake) poll(nullptr, 0, pollSliceMs(wake));
    backoffMs = std::min(backoffMs * 2, 200);
    if (Clock::now() >= deadline) break;
  }
  if (aborted(abortFlag)) return fail(Status::kRemoteError, "bootstrap aborted");
  return fail(Status::kTimeout, "cannot connect to %s: %s", addressToString(addr).c_str(), strerror(lastErr));
}

Status sendAll(int fd, const void* data, size_t bytes, Deadline deadline,
               const std::atomic<bool>* abortFlag) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    if (aborted(abortFlag)) return fail(Status::kRemoteError, "bootstrap aborted");
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return fail(Status::kRemoteError, "send failed: %s", strerror(errno));
    if (Clock::now() >= deadline) return fail(Status::kTimeout, "send timed out");
    pollfd pfd = {fd, POLLOUT, 0};
    poll(&pfd, 1, pollSliceMs(deadline));
  }
  return Status::kSuccess;
}

Status recvAll(int fd, void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abortFlag) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    if (aborted(abortFlag)) return fail(Status::kRemoteError, "bootstrap aborted");
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return fail(Status::kRemoteError, "connection closed by the peer");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return fail(Status::kRemoteError, "recv failed: %s", strerror(errno));
    if (Clock::now() >= deadline) return fail(Status::kTimeout, "recv timed out");
    pollfd pfd = {fd, POLLIN, 0};
    poll(&pfd, 1, pollSliceMs(deadline));
  }
  return Status::kSuccess;
}

long readSome(int fd, void* data, size_t bytes) {
  if (bytes == 0) return 0;
  ssize_t n = ::recv(fd, data, bytes, MSG_DONTWAIT);
  if (n > 0) return static_cast<long>(n);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  return -1;
}

Status randomBytes(void* data, size_t bytes) {
  auto* out = static_cast<uint8_t*>(data);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(out + got, bytes - got, 0);
    if (n > 0)
      got += static_cast<size_t>(n);
    else if (!(n < 0 && errno == EINTR))
      break;
  }
  if (got == bytes) return Status::kSuccess;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);  // kernels without getrandom
  if (fd >= 0) {
    got = 0;
    while (got < bytes) {
      ssize_t n = read(fd, out + got, bytes - got);
      if (n > 0)
        got += static_cast<size_t>(n);
      else if (!(n < 0 && errno == EINTR))
        break;
    }
    close(fd);
  }
  if (got == bytes) return Status::kSuccess;
  return fail(Status::kSystemError, "cannot read %zu random bytes", bytes);
}

}  // namespace mscclpp_nccl
