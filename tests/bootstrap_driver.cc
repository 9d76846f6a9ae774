// Test driver for the TCP bootstrap (built with g++ by tests/test_bootstrap.py; no CUDA).
//
//   driver uid <idfile> [lifetime_s]          create an id (root service in this process), write it, wait
//   driver rank <idfile|-> <rank> <nranks> [timeout_s]
//                                             rendezvous and exercise every call; '-': id from NCCL_COMM_ID
//   driver threads <nranks>                   all ranks as threads of this process, sharing one id
//   driver stranger <idfile> [silent]         connect to the root with junk for a challenge (or say nothing)
//   driver abort                              abort() unblocks pending recv and barrier within a second
//   driver watch <idfile> <rank> <nranks> <dir> <behaviour>
//                                             watchPeers(), print "LOST <peer> <ns>" from the handler,
//                                             write <dir>/ready.<rank>, then <behaviour>: hang (until
//                                             killed), fork-hang (the same, with a forked child holding
//                                             copies of the sockets; its pid in <dir>/child.<rank>),
//                                             barrier (print "BARRIER <status> <ns>" when it ends, then
//                                             linger), linger, leave (destroy at once, then linger),
//                                             exit (exit(0) without destroying), quit (_exit(0): no
//                                             goodbye); lingering ranks destroy in order after 1.5 s
//   driver abortlink                          raising an AbortLink ends a linked rendezvous in progress
//   driver commid [idfile]                    make an id from NCCL_COMM_ID, print "OK commid <key hex>"
//                                             (and write the id to <idfile>)
//   driver idle <count> <lifetime_s>          create <count> ids nobody uses, print "IDS <count>", wait
//   driver victim <dir> <nranks>              a target for hostile peers (tests/test_bootstrap_wire.py):
//                                             writes <dir>/root.id (an id served here) and <dir>/comm.id,
//                                             joins comm.id as rank 0 of <nranks>, writes <dir>/ready,
//                                             waits for a 5-byte message (tag 5) from rank 1 and prints
//                                             "GOT <text>", then joins root.id as rank 0 of 2 and runs
//                                             every call ("OK rank 0")
//
// <ns> are CLOCK_MONOTONIC nanoseconds (steady_clock), comparable with Python's time.monotonic_ns().
// Prints "OK ..." and exits 0, or prints the error and exits 1.
#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "native/bootstrap/abort_link.h"
#include "native/bootstrap/bootstrap.h"
#include "native/bootstrap/socket.h"
#include "native/common/logging.h"

using namespace mscclpp_nccl;

namespace {

using Ms = std::chrono::milliseconds;

std::string describe(Status status) {
  return "status " + std::to_string(static_cast<int>(status)) + ": " + lastError();
}

bool writeId(const std::string& path, const UniqueId& id) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::binary);
    file.write(id.bytes, sizeof(id.bytes));
    if (!file) return false;
  }
  return rename(tmp.c_str(), path.c_str()) == 0;  // readers never see half an id
}

bool readId(const std::string& path, UniqueId* id) {
  for (int attempt = 0; attempt < 300; ++attempt) {
    std::ifstream file(path, std::ios::binary);
    if (file.read(id->bytes, sizeof(id->bytes))) return true;
    std::this_thread::sleep_for(Ms(100));
  }
  return false;
}

uint8_t pattern(int rank, size_t i, int salt) { return static_cast<uint8_t>(rank * 31 + i * 7 + salt); }

std::vector<char> makeMessage(int rank, size_t bytes, int salt) {
  std::vector<char> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(pattern(rank, i, salt));
  return data;
}

bool checkMessage(const std::vector<char>& data, int rank, int salt) {
  for (size_t i = 0; i < data.size(); ++i)
    if (static_cast<uint8_t>(data[i]) != pattern(rank, i, salt)) return false;
  return true;
}

#define CHECK_OK(expr)                                                             \
  do {                                                                             \
    Status s_ = (expr);                                                            \
    if (s_ != Status::kSuccess) return std::string(#expr) + " -> " + describe(s_); \
  } while (0)
#define CHECK(cond, what)                  \
  do {                                     \
    if (!(cond)) return std::string(what); \
  } while (0)

std::string checkAllGather(Bootstrap& bs, size_t bytesPerRank, int salt) {
  const int n = bs.size();
  std::vector<char> data(n * bytesPerRank, 0);
  std::vector<char> own = makeMessage(bs.rank(), bytesPerRank, salt);
  std::copy(own.begin(), own.end(), data.begin() + bs.rank() * bytesPerRank);
  CHECK_OK(bs.allGather(data.data(), bytesPerRank));
  for (int r = 0; r < n; ++r) {
    std::vector<char> slot(data.begin() + r * bytesPerRank, data.begin() + (r + 1) * bytesPerRank);
    CHECK(checkMessage(slot, r, salt), "allGather: wrong data in slot " + std::to_string(r));
  }
  return "";
}

// Every call of the interface, with data that depends on the sender so that misrouting shows.
std::string exercise(Bootstrap& bs) {
  const int rank = bs.rank(), n = bs.size();
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::string err = checkAllGather(bs, 37, 1);
  if (!err.empty()) return err;
  for (int i = 0; i < 3; ++i) CHECK_OK(bs.barrier());

  // Ring: two messages on tag 7 (order must hold), a large one on tag 8 received first (tags match).
  std::vector<char> a = makeMessage(rank, 100 + rank, 2), b = makeMessage(rank, 5, 3);
  std::vector<char> big = makeMessage(rank, (3 << 20) + rank, 4);
  CHECK_OK(bs.send(next, 7, a.data(), a.size()));
  CHECK_OK(bs.send(next, 7, b.data(), b.size()));
  CHECK_OK(bs.send(next, 8, big.data(), big.size()));
  std::vector<char> got((3 << 20) + prev);
  CHECK_OK(bs.recv(prev, 8, got.data(), got.size()));
  CHECK(checkMessage(got, prev, 4), "recv tag 8: wrong data");
  got.assign(100 + prev, 0);
  CHECK_OK(bs.recv(prev, 7, got.data(), got.size()));
  CHECK(checkMessage(got, prev, 2), "recv tag 7 #1: wrong data");
  got.assign(5, 0);
  CHECK_OK(bs.recv(prev, 7, got.data(), got.size()));
  CHECK(checkMessage(got, prev, 3), "recv tag 7 #2: wrong data");

  // Send to self goes through the mailbox.
  CHECK_OK(bs.send(rank, 9, a.data(), a.size()));
  got.assign(a.size(), 0);
  CHECK_OK(bs.recv(rank, 9, got.data(), got.size()));
  CHECK(got == a, "self send: wrong data");

  // A size mismatch is an internal error, not a hang or a crash.
  CHECK_OK(bs.send(next, 10, a.data(), 10));
  Status mismatch = bs.recv(prev, 10, got.data(), 9);
  CHECK(mismatch == Status::kInternalError, "size mismatch gave " + describe(mismatch));
  CHECK(bs.send(next, INT32_MIN, a.data(), 1) == Status::kInvalidArgument, "reserved tag accepted");

  // recvAny: every peer sends one message of its own size on tag 11; each arrives once, from its
  // sender, whole; then nothing is left and the wait times out.
  std::vector<char> mine = makeMessage(rank, 40 + rank, 6);
  for (int peer = 0; peer < n; ++peer)
    if (peer != rank) CHECK_OK(bs.send(peer, 11, mine.data(), mine.size()));
  std::vector<int> seen(n, 0);
  for (int i = 0; i < n - 1; ++i) {
    int from = -1;
    std::vector<char> message;
    CHECK_OK(bs.recvAny(11, 30.0, &from, &message));
    CHECK(from >= 0 && from < n && from != rank && !seen[from], "recvAny: unexpected sender");
    CHECK(message.size() == static_cast<size_t>(40 + from) && checkMessage(message, from, 6),
          "recvAny: wrong data");
    seen[from] = 1;
  }
  int nobody = -1;
  std::vector<char> none;
  CHECK(bs.recvAny(11, 0.05, &nobody, &none) == Status::kTimeout, "recvAny: a message came from nowhere");
  CHECK(bs.recvAny(INT32_MIN, 0.05, &nobody, &none) == Status::kInvalidArgument, "recvAny: reserved tag");
  // wakeRecvAny: a long recvAny, woken from another thread, returns kTimeout at once; a wake that comes
  // first ends the next recvAny.
  {
    const auto start = std::chrono::steady_clock::now();
    std::thread waker([&bs] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      bs.wakeRecvAny();
    });
    const Status woken = bs.recvAny(11, 30.0, &nobody, &none);
    waker.join();
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(woken == Status::kTimeout && waited < 5.0, "recvAny: a wake did not end the wait");
    bs.wakeRecvAny();
    const auto again = std::chrono::steady_clock::now();
    CHECK(bs.recvAny(11, 30.0, &nobody, &none) == Status::kTimeout &&
              std::chrono::steady_clock::now() - again < std::chrono::seconds(5),
          "recvAny: an earlier wake was lost");
  }
  CHECK_OK(bs.barrier());

  // One object used from several threads at once, each on its own tag.
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20 && errors[t].empty(); ++i) {
        std::vector<char> msg = makeMessage(rank, 64 + i, t * 100 + i);
        std::vector<char> in(64 + i);
        Status s = bs.send(next, 100 + t, msg.data(), msg.size());
        if (s == Status::kSuccess) s = bs.recv(prev, 100 + t, in.data(), in.size());
        if (s != Status::kSuccess)
          errors[t] = "thread send/recv: " + describe(s);
        else if (!checkMessage(in, prev, t * 100 + i))
          errors[t] = "thread recv: wrong data";
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (!e.empty()) return e;

  err = checkAllGather(bs, 100000, 5);
  if (!err.empty()) return err;
  CHECK_OK(bs.barrier());
  return "";
}

int runRank(const UniqueId& id, int rank, int nranks, double timeout) {
  std::unique_ptr<Bootstrap> bs;
  Status status = Bootstrap::create(id, rank, nranks, timeout, &bs);
  if (status != Status::kSuccess) {
    printf("ERROR rank %d: create: %s\n", rank, describe(status).c_str());
    return 1;
  }
  std::string err = exercise(*bs);
  if (!err.empty()) {
    printf("ERROR rank %d: %s\n", rank, err.c_str());
    return 1;
  }
  printf("OK rank %d\n", rank);
  return 0;
}

int modeUid(const std::string& path, double lifetime) {
  UniqueId id;
  Status status = bootstrapCreateUniqueId(&id);
  if (status != Status::kSuccess || !writeId(path, id)) {
    printf("ERROR uid: %s\n", describe(status).c_str());
    return 1;
  }
  printf("OK uid\n");
  fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(lifetime));  // the root thread serves meanwhile
  return 0;
}

int modeThreads(int nranks) {
  UniqueId id;
  Status status = bootstrapCreateUniqueId(&id);
  if (status != Status::kSuccess) {
    printf("ERROR threads: %s\n", describe(status).c_str());
    return 1;
  }
  std::vector<int> rc(nranks, 1);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] { rc[r] = runRank(id, r, nranks, bootstrapTimeoutSeconds()); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r)
    if (rc[r]) return 1;
  return 0;
}

// Reads the root's address out of the id; the layout is the bootstrap's own (rendezvous.h: magic, flags,
// 32-byte key, address), which this test mirrors on purpose.
int modeStranger(const std::string& path, bool silent) {
  UniqueId id;
  if (!readId(path, &id)) {
    printf("ERROR stranger: no id\n");
    return 1;
  }
  SocketAddress root;
  memcpy(&root, id.bytes + 8 + 32, sizeof(root));
  Socket sock;
  Status status = connectSocket(root, deadlineAfter(10), nullptr, &sock);
  if (status != Status::kSuccess) {
    printf("ERROR stranger: connect: %s\n", describe(status).c_str());
    return 1;
  }
  printf("CONNECTED\n");  // the test starts the ranks only now
  fflush(stdout);
  if (!silent) {
    std::vector<char> junk(40 + 72, 0x5a);  // no valid challenge, then something proof-shaped
    if (sendAll(sock.fd(), junk.data(), junk.size(), deadlineAfter(5)) != Status::kSuccess) {
      printf("OK stranger dropped while sending\n");
      return 0;
    }
  }
  char byte;
  Status got = recvAll(sock.fd(), &byte, 1, deadlineAfter(15));
  if (got == Status::kRemoteError) {
    printf("OK stranger dropped\n");
    return 0;
  }
  printf("ERROR stranger: %s\n", got == Status::kSuccess ? "the root answered" : "never dropped");
  return 1;
}

int modeAbort() {
  UniqueId id;
  Status status = bootstrapCreateUniqueId(&id);
  if (status != Status::kSuccess) {
    printf("ERROR abort: %s\n", describe(status).c_str());
    return 1;
  }
  std::unique_ptr<Bootstrap> bs[2];
  Status created[2];
  {
    std::thread other([&] { created[1] = Bootstrap::create(id, 1, 2, 30, &bs[1]); });
    created[0] = Bootstrap::create(id, 0, 2, 30, &bs[0]);
    other.join();
  }
  if (created[0] != Status::kSuccess || created[1] != Status::kSuccess) {
    printf("ERROR abort: create failed\n");
    return 1;
  }
  char byte = 1;
  // Rank 0 opens its connection to rank 1, so rank 1 learns of the abort through it.
  if (bs[0]->send(1, 5, &byte, 1) != Status::kSuccess || bs[1]->recv(0, 5, &byte, 1) != Status::kSuccess) {
    printf("ERROR abort: warm-up exchange failed\n");
    return 1;
  }
  using Clock = std::chrono::steady_clock;
  Status recvStatus = Status::kSuccess, barrierStatus = Status::kSuccess;
  Clock::time_point recvDone, barrierDone;
  std::thread receiver([&] {
    char buf[8];
    recvStatus = bs[0]->recv(1, 42, buf, sizeof(buf));  // rank 1 never sends this
    recvDone = Clock::now();
  });
  std::thread waiter([&] {
    barrierStatus = bs[0]->barrier();  // rank 1 never joins
    barrierDone = Clock::now();
  });
  std::this_thread::sleep_for(Ms(300));
  Clock::time_point start = Clock::now();
  bs[0]->abort();
  receiver.join();
  waiter.join();
  auto ms = [&](Clock::time_point t) { return std::chrono::duration<double, std::milli>(t - start).count(); };
  Status after = bs[0]->send(1, 6, &byte, 1);
  Clock::time_point peerStart = Clock::now();
  Status peerStatus = bs[1]->recv(0, 43, &byte, 1);  // rank 0 is gone: must fail, not wait 30 s
  double peerMs = std::chrono::duration<double, std::milli>(Clock::now() - peerStart).count();
  Clock::time_point destroyStart = Clock::now();
  bs[0].reset();
  bs[1].reset();
  double destroyMs = std::chrono::duration<double, std::milli>(Clock::now() - destroyStart).count();
  printf(
      "recv %d after %.1f ms, barrier %d after %.1f ms, later send %d, peer recv %d after %.1f ms, "
      "destroy %.1f ms\n",
      static_cast<int>(recvStatus), ms(recvDone), static_cast<int>(barrierStatus), ms(barrierDone),
      static_cast<int>(after), static_cast<int>(peerStatus), peerMs, destroyMs);
  bool good = recvStatus == Status::kRemoteError && barrierStatus == Status::kRemoteError &&
              after == Status::kRemoteError && peerStatus == Status::kRemoteError && ms(recvDone) < 1000 &&
              ms(barrierDone) < 1000 && peerMs < 1000 && destroyMs < 2000;
  printf(good ? "OK abort\n" : "ERROR abort\n");
  return good ? 0 : 1;
}

long long monotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool touch(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  return static_cast<bool>(file);
}

int modeWatch(const std::string& idPath, int rank, int nranks, const std::string& dir,
              const std::string& behaviour) {
  UniqueId id;
  if (!readId(idPath, &id)) {
    printf("ERROR rank %d: no id\n", rank);
    return 1;
  }
  std::unique_ptr<Bootstrap> bs;
  Status status = Bootstrap::create(id, rank, nranks, 30, &bs);
  if (status == Status::kSuccess)
    status = bs->watchPeers([](int peer) { printf("LOST %d %lld\n", peer, monotonicNs()); });
  if (status != Status::kSuccess) {
    printf("ERROR rank %d: %s\n", rank, describe(status).c_str());
    return 1;
  }
  if (behaviour == "fork-hang") {
    pid_t child = fork();
    if (child == 0) {
      sleep(30);  // holds its copies of the parent's descriptors; killed by the test before that
      _exit(0);
    }
    touch(dir + "/child." + std::to_string(rank), std::to_string(child));
  }
  touch(dir + "/ready." + std::to_string(rank), "");
  if (behaviour == "hang" || behaviour == "fork-hang") {
    for (;;) pause();
  }
  if (behaviour == "exit") {
    bs.release();  // never destroyed: the exit-time goodbye must cover it
    exit(0);
  }
  if (behaviour == "quit") _exit(0);
  if (behaviour == "leave") {
    bs.reset();
    printf("LEFT\n");
  }
  if (behaviour == "barrier") {
    Status barrier = bs->barrier();  // the hanging rank never joins: only its death ends this
    printf("BARRIER %d %lld\n", static_cast<int>(barrier), monotonicNs());
  }
  std::this_thread::sleep_for(Ms(1500));  // a peer's orderly end meanwhile must not count as a loss
  bs.reset();
  printf("DONE rank %d\n", rank);
  return 0;
}

// A rendezvous that can never complete (rank 1 never comes), attached to an AbortLink that another
// thread raises; and a link raised before the rendezvous starts.
int modeAbortLink() {
  UniqueId id;
  if (bootstrapCreateUniqueId(&id) != Status::kSuccess) {
    printf("ERROR abortlink: no id\n");
    return 1;
  }
  using Clock = std::chrono::steady_clock;
  AbortLink link;
  std::unique_ptr<Bootstrap> bs;
  Status created = Status::kSuccess;
  Clock::time_point done;
  std::thread setup([&] {
    created = Bootstrap::create(id, 0, 2, 30, &bs, &link);
    done = Clock::now();
  });
  std::this_thread::sleep_for(Ms(300));
  const Clock::time_point start = Clock::now();
  link.raise();
  setup.join();
  const double ms = std::chrono::duration<double, std::milli>(done - start).count();
  AbortLink raised;
  raised.raise();
  std::unique_ptr<Bootstrap> late;
  const Clock::time_point lateStart = Clock::now();
  Status lateStatus = Bootstrap::create(id, 1, 2, 30, &late, &raised);
  const double lateMs = std::chrono::duration<double, std::milli>(Clock::now() - lateStart).count();
  printf("linked create %d after %.1f ms, create under a raised link %d after %.1f ms\n",
         static_cast<int>(created), ms, static_cast<int>(lateStatus), lateMs);
  bool good = created == Status::kRemoteError && !bs && ms < 1000 && lateStatus == Status::kRemoteError &&
              !late && lateMs < 1000;
  printf(good ? "OK abortlink\n" : "ERROR abortlink\n");
  return good ? 0 : 1;
}

int modeCommId(const char* path) {
  UniqueId id;
  Status status = bootstrapCreateUniqueId(&id);
  if (status == Status::kSuccess && path && !writeId(path, id)) status = Status::kSystemError;
  if (status != Status::kSuccess) {
    printf("ERROR commid: %s\n", describe(status).c_str());
    return 1;
  }
  std::string hex;
  char byte[3];
  for (int i = 8; i < 8 + 32; ++i) {  // the key, after magic and flags (layout as in modeStranger)
    snprintf(byte, sizeof(byte), "%02x", static_cast<uint8_t>(id.bytes[i]));
    hex += byte;
  }
  printf("OK commid %s\n", hex.c_str());
  return 0;
}

// This process's thread count, from /proc/self/status (0 if it cannot be read).
int threadCount() {
  FILE* status = fopen("/proc/self/status", "r");
  if (status == nullptr) return 0;
  char line[256];
  int threads = 0;
  while (fgets(line, sizeof(line), status) != nullptr)
    if (sscanf(line, "Threads: %d", &threads) == 1) break;
  fclose(status);
  return threads;
}

// This process's open descriptors, from /proc/self/fd.
int descriptorCount() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int n = 0;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n - 3;  // ., .. and the one that reads the directory
}

int modeIdle(int count, double lifetime) {
  for (int i = 0; i < count; ++i) {
    UniqueId id;
    Status status = bootstrapCreateUniqueId(&id);
    if (status != Status::kSuccess) {
      printf("ERROR idle: %s\n", describe(status).c_str());
      return 1;
    }
  }
  // Counted at once: the roots time out soon.
  printf("IDS %d THREADS %d FDS %d\n", count, threadCount(), descriptorCount());
  fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(lifetime));
  return 0;
}

int modeVictim(const std::string& dir, int nranks) {
  UniqueId rootId, commId;
  if (bootstrapCreateUniqueId(&rootId) != Status::kSuccess ||
      bootstrapCreateUniqueId(&commId) != Status::kSuccess || !writeId(dir + "/root.id", rootId) ||
      !writeId(dir + "/comm.id", commId)) {
    printf("ERROR victim: no ids: %s\n", lastError());
    return 1;
  }
  std::unique_ptr<Bootstrap> bs;
  Status status = Bootstrap::create(commId, 0, nranks, bootstrapTimeoutSeconds(), &bs);
  if (status != Status::kSuccess) {
    printf("ERROR victim: create: %s\n", describe(status).c_str());
    return 1;
  }
  touch(dir + "/ready", "");
  char text[6] = {};
  status = bs->recv(1, 5, text, 5);
  if (status != Status::kSuccess) {
    printf("ERROR victim: recv: %s\n", describe(status).c_str());
    return 1;
  }
  printf("GOT %s\n", text);
  return runRank(rootId, 0, 2, bootstrapTimeoutSeconds());
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "uid" && argc >= 3) return modeUid(argv[2], argc > 3 ? atof(argv[3]) : 120.0);
  if (mode == "rank" && argc >= 5) {
    UniqueId id;
    std::string path = argv[2];
    Status status = path == "-" ? bootstrapCreateUniqueId(&id) : Status::kSuccess;
    if (status != Status::kSuccess || (path != "-" && !readId(path, &id))) {
      printf("ERROR rank %s: no id: %s\n", argv[3], describe(status).c_str());
      return 1;
    }
    double timeout = argc > 5 ? atof(argv[5]) : bootstrapTimeoutSeconds();
    return runRank(id, atoi(argv[3]), atoi(argv[4]), timeout);
  }
  if (mode == "threads" && argc >= 3) return modeThreads(atoi(argv[2]));
  if (mode == "stranger" && argc >= 3)
    return modeStranger(argv[2], argc > 3 && std::string(argv[3]) == "silent");
  if (mode == "abort") return modeAbort();
  if (mode == "abortlink") return modeAbortLink();
  if (mode == "commid") return modeCommId(argc > 2 ? argv[2] : nullptr);
  if (mode == "idle" && argc >= 4) return modeIdle(atoi(argv[2]), atof(argv[3]));
  if (mode == "victim" && argc >= 4) return modeVictim(argv[2], atoi(argv[3]));
  if (mode == "watch" && argc >= 7) return modeWatch(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5], argv[6]);
  fprintf(stderr, "usage: see the comment at the top of tests/bootstrap_driver.cc\n");
  return 2;
}
