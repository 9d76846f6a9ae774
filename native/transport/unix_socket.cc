#include "native/transport/unix_socket.h"

#include <poll.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace mscclpp_nccl {
namespace {

constexpr int kMaxRetrySleepMs = 20;

socklen_t socketAddress(const UnixSocketName& name, sockaddr_un* address) {
  memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  char* path = address->sun_path + 1;  // leading NUL: the abstract namespace
  int length = snprintf(path, sizeof(address->sun_path) - 1, "mscclpp-nccl.");
  for (uint8_t byte : name.bytes) length += snprintf(path + length, 3, "%02x", byte);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
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

}  // namespace

Status newUnixSocketName(UnixSocketName* out) { return randomBytes(out->bytes, sizeof(out->bytes)); }

int listenOnUnixSocket(const UnixSocketName& name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address;
  socklen_t length = socketAddress(name, &address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, SOMAXCONN) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool peerCredentials(int socket, ucred* out) {
  socklen_t length = sizeof(*out);
  return getsockopt(socket, SOL_SOCKET, SO_PEERCRED, out, &length) == 0 && length == sizeof(*out);
}

bool isOurProcess(const ucred& peer, int32_t pid) { return peer.uid == geteuid() && peer.pid == pid; }

bool waitAnyReadable(std::vector<pollfd>* fds, Deadline deadline, const std::function<bool()>& aborted) {
  while (!aborted()) {
    if (secondsLeft(deadline) <= 0) return false;
    for (pollfd& entry : *fds) entry.revents = 0;
    int n = poll(fds->data(), fds->size(), pollSliceMs(deadline));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
  return false;
}

bool waitReadable(int fd, Deadline deadline, const std::function<bool()>& aborted) {
  std::vector<pollfd> entry{pollfd{fd, POLLIN, 0}};
  return waitAnyReadable(&entry, deadline, aborted) && (entry[0].revents & POLLIN) != 0;
}

bool sendDescriptor(int socket, int fd) {
  FdMessage message;
  cmsghdr* rights = CMSG_FIRSTHDR(&message.header);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(rights), &fd, sizeof(int));
  return sendmsg(socket, &message.header, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

int recvDescriptor(int socket, Deadline deadline, const std::function<bool()>& aborted) {
  if (!waitReadable(socket, deadline, aborted)) return -1;
  FdMessage message;
  if (recvmsg(socket, &message.header, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) != 1) return -1;
  cmsghdr* rights = CMSG_FIRSTHDR(&message.header);
  if (rights == nullptr || rights->cmsg_level != SOL_SOCKET || rights->cmsg_type != SCM_RIGHTS) return -1;
  int fd = -1;
  memcpy(&fd, CMSG_DATA(rights), sizeof(int));
  return fd;
}

int connectToProcess(const UnixSocketName& name, int32_t pid, const void* hello, size_t helloBytes,
                     Deadline deadline, const std::function<bool()>& aborted, std::string* why) {
  sockaddr_un address;
  const socklen_t length = socketAddress(name, &address);
  int tries = 0, sleepMs = 1;
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *why = std::string("socket: ") + strerror(errno);
      return -1;
    }
    ++tries;
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0) {
      ucred server{};
      if (!peerCredentials(fd, &server) || !isOurProcess(server, pid)) {
        *why = "the socket's owner is not the process that rank announced";
      } else if (send(fd, hello, helloBytes, MSG_NOSIGNAL) != static_cast<ssize_t>(helloBytes)) {
        *why = std::string("send: ") + strerror(errno);
      } else {
        return fd;
      }
      close(fd);
      return -1;
    }
    const int error = errno;
    close(fd);
    if (error != EAGAIN && error != EINTR) {
      *why = std::string("connect: ") + strerror(error);
      return -1;
    }
    if (aborted() || secondsLeft(deadline) <= 0) {
      *why =
          "its backlog stayed full (" + std::to_string(tries) + " tries): another process keeps connecting";
      return -1;
    }
    poll(nullptr, 0, sleepMs);
    sleepMs = std::min(2 * sleepMs, kMaxRetrySleepMs);
  }
}

}  // namespace mscclpp_nccl
