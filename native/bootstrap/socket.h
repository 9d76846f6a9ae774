// Small TCP helpers for the bootstrap: fixed-size v4/v6 addresses, interface selection, an RAII socket,
// and connect/send/recv that give up at a deadline. Every socket is non-blocking and close-on-exec; the
// blocking helpers poll in short slices so that an abort flag is noticed promptly.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

#include "native/common/status.h"

namespace mscclpp_nccl {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
Deadline deadlineAfter(double seconds);
// Seconds left until `deadline` (0 when past).
double secondsLeft(Deadline deadline);
// A poll timeout in milliseconds: until `deadline`, but at most one short slice, so that a blocked
// caller notices an abort promptly.
int pollSliceMs(Deadline deadline);

// Fills `data` with `bytes` random bytes from the kernel (getrandom, else /dev/urandom).
Status randomBytes(void* data, size_t bytes);

// A v4 or v6 address of fixed size, so that it can be copied into ids and messages as plain bytes.
union SocketAddress {
  sockaddr sa;
  sockaddr_in v4;
  sockaddr_in6 v6;
};
static_assert(sizeof(SocketAddress) == 28, "SocketAddress must stay a fixed wire size");

socklen_t addressLength(const SocketAddress& addr);
std::string addressToString(const SocketAddress& addr);  // "1.2.3.4:5" or "[::1]:5"
bool isLoopback(const SocketAddress& addr);
bool isValidAddress(const SocketAddress& addr);  // AF_INET or AF_INET6
SocketAddress loopbackAddress(int family);       // port 0

// Parses "ip:port", "[ipv6]:port" or "hostname:port" (resolved, honouring NCCL_SOCKET_FAMILY).
Status parseAddress(const std::string& text, SocketAddress* out);

// The address (port 0) of the interface picked by NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY; without
// NCCL_SOCKET_IFNAME, the first up interface that is neither `lo` nor `docker*`, else loopback.
Status selectInterfaceAddress(SocketAddress* out, std::string* ifName);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Wakes any thread blocked on this socket (also in poll) without invalidating the descriptor.
  void shutdown();
  void close();

 private:
  int fd_ = -1;
};

// Binds to `addr` (port 0: ephemeral) and listens; `bound` receives the actual address.
Status listenSocket(const SocketAddress& addr, Socket* out, SocketAddress* bound);
// Accepts one pending connection, if any (`out` stays invalid when none is pending).
Status acceptSocket(const Socket& listener, Socket* out);
// Connects, retrying refused or unreachable attempts until `deadline` (kTimeout) or `abortFlag`
// (kRemoteError).
Status connectSocket(const SocketAddress& addr, Deadline deadline, const std::atomic<bool>* abortFlag,
                     Socket* out);
// Transfers exactly `bytes`, or fails at the deadline, on abort, or when the peer closes.
Status sendAll(int fd, const void* data, size_t bytes, Deadline deadline,
               const std::atomic<bool>* abortFlag = nullptr);
Status recvAll(int fd, void* data, size_t bytes, Deadline deadline,
               const std::atomic<bool>* abortFlag = nullptr);

// One non-blocking read for poll loops: >0 bytes read, 0 nothing available now, -1 closed or failed.
long readSome(int fd, void* data, size_t bytes);

}  // namespace mscclpp_nccl
