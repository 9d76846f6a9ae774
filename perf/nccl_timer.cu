// Times collectives from C, the way nccl-tests does, so that eager numbers carry no Python overhead:
// host wall time around N back-to-back out-of-place calls after warm-up and a barrier, then the same calls
// captured in a CUDA graph and replayed; each figure the median of NCCL_TIMER_TRIALS (default 3) timings,
// the eager ones taken in turns over all sizes (each size's timings then lie apart in time).
// Every size is timed eagerly before any capture, as separate nccl-tests runs with and without -G would:
// once a communicator was captured, NCCL (and this library) order its eager calls against graph launches,
// which costs each eager call an event wait and record.
// Works with any libnccl.so.2 (ours or stock), picked by the loader. Sizes are nccl-tests' size column:
// the total bytes of all_gather's and gather's output, reduce_scatter's input, scatter's root buffer and
// each rank's alltoall buffer; the message of all_reduce, broadcast and reduce; what each rank sends in
// sendrecv (a ring: to rank + 1, from rank - 1). bf16, sum, root 0. ncclGather and ncclScatter are looked
// up at run time.
// host_us is the time the eager calls take to return, before the stream is synchronized: the per-call host
// cost. The pseudo-collective `empty` launches one empty kernel per call instead: the same loop's floor,
// which no library that launches a kernel per call can go under.
// COLLECTIVE may name several, comma-separated: one launch then times them all (every eager pass before
// the first capture), printing one table per collective, each under its own header line.
// NCCL_TIMER_PHASES=1 also prints, for sendrecv's eager calls, the host time of each of the group's four
// calls (ncclGroupStart, ncclSend, ncclRecv, ncclGroupEnd), to tell where a group's host time goes.
// NCCL_TIMER_WINDOWS=1 takes the buffers from ncclMemAlloc and registers them as symmetric windows
// (like nccl-tests -R 2), which lets libraries run zero-copy algorithms.
// NCCL_TIMER_TIMELINE=1 makes every rank print, for each eager timing, three steady-clock readings in
// microseconds (shared by the processes of one host): when its calls began, when the last returned, and
// when its stream drained. Rank 0's eager figure is last minus first; the lines tell how much of it is
// the ranks starting apart, a slow rank's host, or the GPU.
//
// Build:  nvcc -O2 -I include -o build/nccl_timer perf/nccl_timer.cu -L mscclpp_nccl/lib -l:libnccl.so.2
// Run:    LD_LIBRARY_PATH=mscclpp_nccl/lib python -m mscclpp_nccl.run -n 4 --mps -- \
//             build/nccl_timer all_reduce 8 33554432 4
//         (stock: LD_LIBRARY_PATH=<dir of stock libnccl.so.2>, same command)
// Ranks meet through a file: rank 0 writes its ncclUniqueId to $NCCL_TIMER_ID_FILE (default: a name
// derived from the launcher's id) and the others read it, so the library under test makes the id.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    cudaError_t e = (call);                                                                \
    if (e != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)
#define CHECK_NCCL(call)                                                                       \
  do {                                                                                         \
    ncclResult_t r = (call);                                                                   \
    if (r != ncclSuccess) {                                                                    \
      fprintf(stderr, "%s:%d %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r), \
              ncclGetLastError(nullptr));                                                      \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

namespace {

int envInt(const char* name, int fallback) {
  const char* value = getenv(name);
  return value ? atoi(value) : fallback;
}

// Rank 0 publishes the id in a file (written whole, then renamed); the others wait for it. The file is
// named after the launcher's own id, which is new for every launch, so no stale file is ever read.
bool shareId(int rank, ncclUniqueId* id) {
  const char* explicitPath = getenv("NCCL_TIMER_ID_FILE");
  const char* launch = getenv("MSCCLPP_NCCL_UNIQUE_ID");
  if (!explicitPath && !launch) {
    fprintf(stderr, "start under python -m mscclpp_nccl.run, or set NCCL_TIMER_ID_FILE\n");
    return false;
  }
  std::string path = explicitPath ? explicitPath : "/tmp/nccl_timer." + std::string(launch).substr(0, 96);
  if (rank == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return false;
    std::string temporary = path + ".tmp";
    FILE* file = fopen(temporary.c_str(), "wb");
    if (!file || fwrite(id, sizeof(*id), 1, file) != 1) return false;
    fclose(file);
    return rename(temporary.c_str(), path.c_str()) == 0;
  }
  for (int attempt = 0; attempt < 6000; ++attempt, usleep(10000)) {
    FILE* file = fopen(path.c_str(), "rb");
    if (!file) continue;
    bool ok = fread(id, sizeof(*id), 1, file) == 1;
    fclose(file);
    if (ok) return true;
  }
  return false;
}

using Clock = std::chrono::steady_clock;

__global__ void emptyKernel() {}

// Host microseconds one launch of an empty kernel takes: the floor under any library's per-call cost.
// The middle of a few timings: one scheduler hiccup on the host (eight ranks share 16 cores) would
// otherwise stand for a whole size.
double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double emptyLaunchMicros(cudaStream_t stream) {
  for (int i = 0; i < 10; ++i) emptyKernel<<<1, 32, 0, stream>>>();
  cudaStreamSynchronize(stream);
  const int launches = 200;
  auto start = Clock::now();
  for (int i = 0; i < launches; ++i) emptyKernel<<<1, 32, 0, stream>>>();
  double micros = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / launches;
  cudaStreamSynchronize(stream);
  return micros;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s COLLECTIVE MIN_BYTES MAX_BYTES [FACTOR] [ITERS]\n", argv[0]);
    return 2;
  }
  const size_t minBytes = strtoull(argv[2], nullptr, 0), maxBytes = strtoull(argv[3], nullptr, 0);
  const size_t factor = argc > 4 ? strtoull(argv[4], nullptr, 0) : 2;
  const int iters = argc > 5 ? atoi(argv[5]) : 20, warmup = 5;
  const int trials = std::max(1, envInt("NCCL_TIMER_TRIALS", 3));
  const bool showTrials = envInt("NCCL_TIMER_SHOW_TRIALS", 0) != 0;  // each eager timing, in order
  const bool timeline = envInt("NCCL_TIMER_TIMELINE", 0) != 0;
  const int rank = envInt("MSCCLPP_NCCL_RANK", envInt("RANK", 0));
  const int nranks = envInt("MSCCLPP_NCCL_WORLD_SIZE", envInt("WORLD_SIZE", 1));
  std::vector<std::string> collectives;
  for (std::string list = argv[1]; !list.empty();) {
    const size_t comma = list.find(',');
    collectives.push_back(list.substr(0, comma));
    list = comma == std::string::npos ? "" : list.substr(comma + 1);
  }
  const char* known[] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast",
                         "reduce",     "gather",     "scatter",        "sendrecv", "empty"};
  for (const std::string& collective : collectives) {
    bool isKnown = false;
    for (const char* name : known) isKnown = isKnown || collective == name;
    if (!isKnown) {
      fprintf(stderr, "unknown collective %s\n", collective.c_str());
      return 2;
    }
  }

  CHECK_CUDA(cudaSetDevice(0));
  ncclUniqueId id;
  if (!shareId(rank, &id)) {
    fprintf(stderr, "rank %d: could not share the unique id\n", rank);
    return 1;
  }
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void *send = nullptr, *recv = nullptr;
  const bool windows = envInt("NCCL_TIMER_WINDOWS", 0) != 0;
  ncclWindow_t sendWindow = nullptr, recvWindow = nullptr;
  if (windows) {
    CHECK_NCCL(ncclMemAlloc(&send, maxBytes));
    CHECK_NCCL(ncclMemAlloc(&recv, maxBytes));
    CHECK_NCCL(ncclCommWindowRegister(comm, send, maxBytes, &sendWindow, NCCL_WIN_COLL_SYMMETRIC));
    CHECK_NCCL(ncclCommWindowRegister(comm, recv, maxBytes, &recvWindow, NCCL_WIN_COLL_SYMMETRIC));
  } else {
    CHECK_CUDA(cudaMalloc(&send, maxBytes));
    CHECK_CUDA(cudaMalloc(&recv, maxBytes));
  }
  CHECK_CUDA(cudaMemset(send, 0, maxBytes));
  float* barrierWord = nullptr;
  CHECK_CUDA(cudaMalloc(&barrierWord, sizeof(float)));
  // Every timing starts with the ranks together, as nccl-tests' host barrier does: a rank that left the
  // warm-up late would otherwise add its lag to the others' time. One float all-reduced, then drained.
  auto barrier = [&]() -> int {  // 0, or 1 after printing what failed
    CHECK_NCCL(ncclAllReduce(barrierWord, barrierWord, 1, ncclFloat, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    return 0;
  };
  int version = 0;
  ncclGetVersion(&version);
  const double emptyLaunch = emptyLaunchMicros(stream);
  if (rank == 0) printf("# empty kernel launch: %.2f us of host time\n", emptyLaunch);

  std::vector<size_t> sizes;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
    sizes.push_back(bytes);
    if (bytes > maxBytes / factor) break;
  }
  const bool phases = envInt("NCCL_TIMER_PHASES", 0) != 0;
  double phaseUs[4] = {};  // sendrecv's four calls, summed over the eager calls of one size
  // One call of `collective` with a message of `bytes` (see the size column above).
  auto call = [&](const std::string& collective, size_t bytes) -> ncclResult_t {
    const size_t count = bytes / 2, share = count / nranks;  // elements: whole message, per rank
    if (collective == "empty") {
      emptyKernel<<<1, 32, 0, stream>>>();
      return cudaGetLastError() == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
    }
    if (collective == "all_gather") return ncclAllGather(send, recv, share, ncclBfloat16, comm, stream);
    if (collective == "reduce_scatter")
      return ncclReduceScatter(send, recv, share, ncclBfloat16, ncclSum, comm, stream);
    if (collective == "alltoall") return ncclAlltoAll(send, recv, share, ncclBfloat16, comm, stream);
    if (collective == "broadcast") return ncclBroadcast(send, recv, count, ncclBfloat16, 0, comm, stream);
    if (collective == "reduce") return ncclReduce(send, recv, count, ncclBfloat16, ncclSum, 0, comm, stream);
    if (collective == "gather" || collective == "scatter") {
      // Looked up at run time: a library without them still times the rest.
      using RootedCall =
          ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
      auto rooted = reinterpret_cast<RootedCall>(
          dlsym(RTLD_DEFAULT, collective == "gather" ? "ncclGather" : "ncclScatter"));
      return rooted ? rooted(send, recv, share, ncclBfloat16, 0, comm, stream) : ncclInvalidUsage;
    }
    if (collective == "sendrecv") {
      Clock::time_point at[5];  // read only with NCCL_TIMER_PHASES: plain timing pays no clock reads
      auto mark = [&](int k) {
        if (phases) at[k] = Clock::now();
      };
      mark(0);
      ncclGroupStart();
      mark(1);
      ncclSend(send, count, ncclBfloat16, (rank + 1) % nranks, comm, stream);
      mark(2);
      ncclRecv(recv, count, ncclBfloat16, (rank + nranks - 1) % nranks, comm, stream);
      mark(3);
      const ncclResult_t result = ncclGroupEnd();
      mark(4);
      for (int k = 0; phases && k < 4; ++k)
        phaseUs[k] += std::chrono::duration<double, std::micro>(at[k + 1] - at[k]).count();
      return result;
    }
    return ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, comm, stream);
  };

  // Eager: every size, every trial, before any capture (see the top of this file). The trials go round
  // all sizes in turn, so that the timings of one size lie seconds apart and one host stall, which can
  // last milliseconds on 16 cores shared by 8 ranks and an MPS server, spoils at most one of them.
  std::vector<std::vector<std::vector<double>>> eager(collectives.size(),
                                                      std::vector<std::vector<double>>(sizes.size()));
  std::vector<std::vector<std::vector<double>>> host = eager;
  for (int trial = 0; trial < trials; ++trial)
    for (size_t which = 0; which < collectives.size(); ++which)
      for (size_t at = 0; at < sizes.size(); ++at) {
        const std::string& collective = collectives[which];
        const size_t bytes = sizes[at];
        for (int i = 0; i < warmup; ++i) CHECK_NCCL(call(collective, bytes));
        if (barrier() != 0) return 1;
        const auto start = Clock::now();
        for (double& phase : phaseUs) phase = 0;
        for (int i = 0; i < iters; ++i) CHECK_NCCL(call(collective, bytes));
        const auto returned = Clock::now();
        host[which][at].push_back(std::chrono::duration<double, std::micro>(returned - start).count() /
                                  iters);
        if (phases && collective == "sendrecv" && rank == 0)
          printf("# phases %zu B (us per call): group start %.2f, send %.2f, recv %.2f, group end %.2f\n",
                 bytes, phaseUs[0] / iters, phaseUs[1] / iters, phaseUs[2] / iters, phaseUs[3] / iters);
        CHECK_CUDA(cudaStreamSynchronize(stream));
        const auto drained = Clock::now();
        eager[which][at].push_back(std::chrono::duration<double, std::micro>(drained - start).count() /
                                   iters);
        if (timeline) {
          auto us = [](Clock::time_point t) {
            return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
          };
          printf("# timeline rank %d %s %zu B trial %d calls %d: began %.2f returned %.2f drained %.2f\n",
                 rank, collective.c_str(), bytes, trial, iters, us(start), us(returned), us(drained));
        }
      }

  // Graphs: each size captured once and replayed in every trial; then its line of the table.
  for (size_t which = 0; which < collectives.size(); ++which)
    for (size_t at = 0; at < sizes.size(); ++at) {
      const std::string& collective = collectives[which];
      const size_t bytes = sizes[at];
      if (at == 0 && rank == 0)
        printf("# nccl_timer: %s bf16 sum, %d ranks, NCCL version code %d%s\n#%12s %12s %12s %12s\n",
               collective.c_str(), nranks, version, windows ? ", symmetric windows" : "", "bytes", "eager_us",
               "graph_us", "host_us");
      if (showTrials && rank == 0) {
        printf("# trials %s %zu B, eager us:", collective.c_str(), bytes);
        for (double us : eager[which][at]) printf(" %.2f", us);
        printf("\n");
      }
      for (int i = 0; i < warmup; ++i) CHECK_NCCL(call(collective, bytes));
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < iters; ++i) CHECK_NCCL(call(collective, bytes));
      CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
      CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      CHECK_CUDA(cudaGraphLaunch(exec, stream));
      std::vector<double> graphUs;
      for (int trial = 0; trial < trials; ++trial) {
        if (barrier() != 0) return 1;
        const auto start = Clock::now();
        const int replays = 5;
        for (int i = 0; i < replays; ++i) CHECK_CUDA(cudaGraphLaunch(exec, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        graphUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
                          (replays * iters));
      }
      CHECK_CUDA(cudaGraphExecDestroy(exec));
      CHECK_CUDA(cudaGraphDestroy(graph));
      if (rank == 0)
        printf(" %12zu %12.2f %12.2f %12.2f\n", bytes, median(eager[which][at]), median(graphUs),
               median(host[which][at]));
    }
  if (windows) {
    CHECK_NCCL(ncclCommWindowDeregister(comm, sendWindow));
    CHECK_NCCL(ncclCommWindowDeregister(comm, recvWindow));
  }
  CHECK_CUDA(cudaFree(barrierWord));
  CHECK_NCCL(ncclCommDestroy(comm));
  if (windows) {
    CHECK_NCCL(ncclMemFree(send));
    CHECK_NCCL(ncclMemFree(recv));
  }
  return 0;
}
