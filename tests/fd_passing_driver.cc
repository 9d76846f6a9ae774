// Test driver for passing file descriptors between ranks (native/transport/fd_passing.cc), built with
// g++ by tests/test_fd_passing.py; no CUDA.
//
//   fd_passing_driver <idfile> <rank> <nranks> [silent_rank [late_rank late_ms]]
//     Rank 0 makes the id and writes it to <idfile>; the others wait for it. Every rank but silent_rank
//     offers a memfd holding "rank R"; each checks that it received a working descriptor of every other
//     offering rank (its contents read back) and -1 for silent_rank. late_rank sleeps late_ms before
//     the exchange (leaving the others' sockets open that long, for strangers to try). Prints
//     "EXCHANGE rank R took S s" (exchangeFds alone), then "OK rank R" and exits 0, or prints the error
//     and exits 1. Without arguments: prints usage and exits 2. With MSCCLPP_TEST_REFUSE_THREADS=1 set,
//     no thread can start during the exchange (tests/thread_refusal.cc).
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "native/common/logging.h"
#include "native/transport/fd_passing.h"
#include "tests/thread_refusal.h"

using namespace mscclpp_nccl;

namespace {

bool shareId(const std::string& path, int rank, UniqueId* id) {
  if (rank == 0) {
    if (!ok(bootstrapCreateUniqueId(id))) return false;
    std::string tmp = path + ".tmp";
    {
      std::ofstream file(tmp, std::ios::binary);
      file.write(id->bytes, sizeof(id->bytes));
      if (!file) return false;
    }
    return rename(tmp.c_str(), path.c_str()) == 0;
  }
  for (int attempt = 0; attempt < 3000; ++attempt) {
    std::ifstream file(path, std::ios::binary);
    if (file.read(id->bytes, sizeof(id->bytes))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

int failed(const std::string& what) {
  printf("FAIL %s (%s)\n", what.c_str(), lastError());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <idfile> <rank> <nranks> [silent_rank [late_rank late_ms]]\n", argv[0]);
    return 2;
  }
  const int rank = atoi(argv[2]), nranks = atoi(argv[3]);
  const int silent = argc > 4 ? atoi(argv[4]) : -1;
  const int late = argc > 6 ? atoi(argv[5]) : -1, lateMs = argc > 6 ? atoi(argv[6]) : 0;
  UniqueId id;
  if (!shareId(argv[1], rank, &id)) return failed("sharing the id");
  std::unique_ptr<Bootstrap> bootstrap;
  if (!ok(Bootstrap::create(id, rank, nranks, 60, &bootstrap))) return failed("bootstrap");

  // Every rank is its own process; the topology needs no GPU for that.
  Topology topology;
  topology.ranks.resize(nranks);
  topology.ranks[rank].hostId = 1;
  topology.ranks[rank].processId = static_cast<uint64_t>(getpid());
  if (!ok(bootstrap->allGather(topology.ranks.data(), sizeof(RankInfo)))) return failed("all-gather");

  int offered = -1;
  const std::string text = "rank " + std::to_string(rank);
  if (rank != silent) {
    offered = memfd_create("fd_passing_driver", MFD_CLOEXEC);
    if (offered < 0 || write(offered, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      return failed("memfd");
  }
  std::vector<int> received;
  if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(lateMs));
  const auto start = std::chrono::steady_clock::now();
  const char* refuse = getenv("MSCCLPP_TEST_REFUSE_THREADS");
  if (refuse != nullptr && strcmp(refuse, "1") == 0) threadsAllowed = 0;
  const Status exchanged = exchangeFds(*bootstrap, topology, offered, &received);
  threadsAllowed = -1;
  printf("EXCHANGE rank %d took %.3f s\n", rank,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  fflush(stdout);
  if (!ok(exchanged)) return failed("exchangeFds");
  for (int r = 0; r < nranks; ++r) {
    const bool expected = r != rank && r != silent;
    if (!expected) {
      if (received[r] != -1)
        return failed("a descriptor from rank " + std::to_string(r) + ", which offered none");
      continue;
    }
    char buffer[64] = {};
    const std::string want = "rank " + std::to_string(r);
    if (received[r] < 0 ||
        pread(received[r], buffer, sizeof(buffer) - 1, 0) != static_cast<ssize_t>(want.size()) ||
        want != buffer)
      return failed("the descriptor of rank " + std::to_string(r) + " reads '" + buffer + "'");
    close(received[r]);
  }
  if (offered >= 0) close(offered);
  if (!ok(bootstrap->barrier())) return failed("barrier");
  printf("OK rank %d\n", rank);
  return 0;
}
