// NCCL's ordering rule seen from a C program: one communicator, a chain of collectives where each call
// reads what the previous one wrote, issued on changing streams with no host synchronisation; a group
// whose sends and receives use two streams; then part of the chain captured in a CUDA graph across
// three streams (while eager calls of the same communicator run on a fourth), replayed on two different
// streams and followed at once by an eager call on another. Only the library's ordering keeps the
// calls apart. Every rank checks every element exactly against a host model of all ranks (uint32
// arithmetic wraps alike on both sides).
//
// Build: nvcc -O2 -I include -o build/stream_order_check tests/gpu/stream_order_check.cu \
//            -L mscclpp_nccl/lib -l:libnccl.so.2
// Run:   python -m mscclpp_nccl.run -n 4 --mps -- build/stream_order_check [count_per_rank ...]
// Prints "PASS stream_order count=C" per count; exits non-zero on the first mismatch or error.
// STREAM_ORDER_ONE_STREAM_GROUPS=1 keeps each group on one stream (for libraries that refuse more).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "nccl.h"

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CHECK_NCCL(call)                                                                            \
  do {                                                                                              \
    ncclResult_t r = (call);                                                                        \
    if (r != ncclSuccess) {                                                                         \
      fprintf(stderr, "FAIL %s:%d %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r), \
              ncclGetLastError(nullptr));                                                           \
      exit(1);                                                                                      \
    }                                                                                               \
  } while (0)

namespace {

using Buffer = std::vector<uint32_t>;
constexpr int kOps = 7;
constexpr int kStreams = 4;  // the chain uses the first three; the fourth runs eager work beside a capture

uint32_t initial(int rank, size_t i, int which) {
  uint64_t x = (static_cast<uint64_t>(rank) << 40) ^ (i * 0x9e3779b97f4a7c15ull) ^ (which * 0x5bd1e995ull);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return static_cast<uint32_t>(x >> 32);
}

// Every rank's buffers, on the host; step() applies one call of the chain to all of them.
struct Model {
  int nranks;
  size_t count;  // per rank: all-gather input, reduce-scatter output, all-to-all block
  std::vector<Buffer> buf[2];

  Model(int n, size_t c) : nranks(n), count(c) {
    for (int b = 0; b < 2; ++b)
      for (int r = 0; r < n; ++r) {
        buf[b].emplace_back(c * n);
        for (size_t i = 0; i < c * n; ++i) buf[b][r][i] = initial(r, i, b);
      }
  }

  void step(int k) {
    std::vector<Buffer>& src = buf[k % 2];
    std::vector<Buffer>& dst = buf[(k + 1) % 2];
    const size_t total = count * nranks;
    switch (k % kOps) {
      case 0:  // all-reduce, sum
      case 6:  // all-reduce, max
        for (size_t i = 0; i < total; ++i) {
          uint32_t v = src[0][i];
          for (int r = 1; r < nranks; ++r) v = k % kOps == 0 ? v + src[r][i] : std::max(v, src[r][i]);
          for (int r = 0; r < nranks; ++r) dst[r][i] = v;
        }
        break;
      case 1:  // reduce-scatter, sum: the first `count` elements
        for (int r = 0; r < nranks; ++r)
          for (size_t i = 0; i < count; ++i) {
            uint32_t v = 0;
            for (int q = 0; q < nranks; ++q) v += src[q][r * count + i];
            dst[r][i] = v;
          }
        break;
      case 2:  // all-gather of the first `count` elements
        for (int r = 0; r < nranks; ++r)
          for (int q = 0; q < nranks; ++q)
            for (size_t i = 0; i < count; ++i) dst[r][q * count + i] = src[q][i];
        break;
      case 3:  // all-to-all
        for (int r = 0; r < nranks; ++r)
          for (int q = 0; q < nranks; ++q)
            for (size_t i = 0; i < count; ++i) dst[r][q * count + i] = src[q][r * count + i];
        break;
      case 4:  // ring: each rank receives its predecessor's buffer
        for (int r = 0; r < nranks; ++r) dst[r] = src[(r + nranks - 1) % nranks];
        break;
      case 5:  // broadcast from a root that moves along
        for (int r = 0; r < nranks; ++r) dst[r] = src[k % nranks];
        break;
    }
  }
};

struct Rank {
  int rank, nranks;
  bool oneStreamGroups;
  size_t count;
  ncclComm_t comm;
  cudaStream_t streams[kStreams];
  uint32_t* buf[2];

  cudaStream_t chainStream(int k) const { return streams[(k * 5 + k / 3) % 3]; }

  // Issues call k of the chain; a ring step's receive goes on another stream than its send.
  void step(int k) {
    const uint32_t* src = buf[k % 2];
    uint32_t* dst = buf[(k + 1) % 2];
    cudaStream_t s = chainStream(k);
    const size_t total = count * nranks;
    switch (k % kOps) {
      case 0:
        CHECK_NCCL(ncclAllReduce(src, dst, total, ncclUint32, ncclSum, comm, s));
        break;
      case 1:
        CHECK_NCCL(ncclReduceScatter(src, dst, count, ncclUint32, ncclSum, comm, s));
        break;
      case 2:
        CHECK_NCCL(ncclAllGather(src, dst, count, ncclUint32, comm, s));
        break;
      case 3:
        CHECK_NCCL(ncclAlltoAll(src, dst, count, ncclUint32, comm, s));
        break;
      case 4:
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclSend(src, total, ncclUint32, (rank + 1) % nranks, comm, s));
        CHECK_NCCL(ncclRecv(dst, total, ncclUint32, (rank + nranks - 1) % nranks, comm,
                            oneStreamGroups ? s : chainStream(k + 1)));
        CHECK_NCCL(ncclGroupEnd());
        break;
      case 5:
        CHECK_NCCL(ncclBroadcast(src, dst, total, ncclUint32, k % nranks, comm, s));
        break;
      case 6:
        CHECK_NCCL(ncclAllReduce(src, dst, total, ncclUint32, ncclMax, comm, s));
        break;
    }
  }

  void load(const Model& model) {
    for (int b = 0; b < 2; ++b)
      CHECK_CUDA(cudaMemcpy(buf[b], model.buf[b][rank].data(), count * nranks * 4, cudaMemcpyHostToDevice));
  }

  bool matches(const Model& model, const char* phase) {
    CHECK_CUDA(cudaDeviceSynchronize());
    for (int b = 0; b < 2; ++b) {
      Buffer got(count * nranks);
      CHECK_CUDA(cudaMemcpy(got.data(), buf[b], got.size() * 4, cudaMemcpyDeviceToHost));
      const Buffer& want = model.buf[b][rank];
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i]) {
          fprintf(stderr, "FAIL rank %d count %zu %s: buffer %d element %zu is %u, expected %u\n", rank,
                  count, phase, b, i, got[i], want[i]);
          return false;
        }
    }
    return true;
  }
};

bool parseId(const char* hex, ncclUniqueId* id) {
  if (!hex || strlen(hex) != 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    unsigned byte = 0;
    if (sscanf(hex + 2 * i, "%2x", &byte) != 1) return false;
    id->internal[i] = static_cast<char>(byte);
  }
  return true;
}

// Eager chain, then a captured part replayed twice beside eager calls; true when every value matches.
bool runChain(Rank& me, size_t count) {
  me.count = count;
  Model model(me.nranks, count);
  const size_t bytes = count * me.nranks * 4;
  for (int b = 0; b < 2; ++b) CHECK_CUDA(cudaMalloc(&me.buf[b], bytes));
  me.load(model);
  CHECK_CUDA(cudaDeviceSynchronize());

  constexpr int kEagerSteps = 70;
  for (int k = 0; k < kEagerSteps; ++k) {
    me.step(k);
    model.step(k);
  }
  if (!me.matches(model, "eager chain")) return false;

  // Capture steps 70..89 on streams 0-2 (forked into the capture from stream 0) while stream 3 runs
  // eager all-reduces of the same communicator on a buffer of its own.
  uint32_t* side = nullptr;
  CHECK_CUDA(cudaMalloc(&side, bytes));
  CHECK_CUDA(cudaMemcpy(side, model.buf[0][me.rank].data(), bytes, cudaMemcpyHostToDevice));
  Buffer sideWant(count * me.nranks);
  for (size_t i = 0; i < sideWant.size(); ++i) {
    uint32_t v = 0;
    for (int r = 0; r < me.nranks; ++r) v += model.buf[0][r][i];
    sideWant[i] = v;
  }
  cudaEvent_t fork, joined[2];
  CHECK_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (cudaEvent_t& e : joined) CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CHECK_CUDA(cudaStreamBeginCapture(me.streams[0], cudaStreamCaptureModeGlobal));
  CHECK_CUDA(cudaEventRecord(fork, me.streams[0]));
  CHECK_CUDA(cudaStreamWaitEvent(me.streams[1], fork, 0));
  CHECK_CUDA(cudaStreamWaitEvent(me.streams[2], fork, 0));
  constexpr int kCaptured = 21;  // a multiple of kOps: the replays repeat the same calls
  for (int k = kEagerSteps; k < kEagerSteps + kCaptured; ++k) {
    me.step(k);
    if (k == kEagerSteps + 3)
      CHECK_NCCL(ncclAllReduce(side, side, count * me.nranks, ncclUint32, ncclSum, me.comm, me.streams[3]));
  }
  for (int i = 0; i < 2; ++i) {
    CHECK_CUDA(cudaEventRecord(joined[i], me.streams[i + 1]));
    CHECK_CUDA(cudaStreamWaitEvent(me.streams[0], joined[i], 0));
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamEndCapture(me.streams[0], &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  // A graph launch on another stream than the last eager call, a second launch on a third stream, and
  // an eager call on a fourth that reads the graph's output: no host synchronisation between them.
  CHECK_CUDA(cudaGraphLaunch(exec, me.streams[1]));
  CHECK_CUDA(cudaGraphLaunch(exec, me.streams[3]));
  for (int replay = 0; replay < 2; ++replay)
    for (int k = kEagerSteps; k < kEagerSteps + kCaptured; ++k) model.step(k);
  const int last = kEagerSteps + kCaptured;  // the model's next step reads the buffer the graph wrote last
  me.step(last);
  model.step(last);
  CHECK_CUDA(cudaDeviceSynchronize());
  Buffer gotSide(sideWant.size());
  CHECK_CUDA(cudaMemcpy(gotSide.data(), side, bytes, cudaMemcpyDeviceToHost));
  if (gotSide != sideWant) {
    fprintf(stderr, "FAIL rank %d count %zu: the eager all-reduce issued during capture is wrong\n", me.rank,
            count);
    return false;
  }
  if (!me.matches(model, "graph replays")) return false;
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaEventDestroy(fork));
  for (cudaEvent_t e : joined) CHECK_CUDA(cudaEventDestroy(e));
  CHECK_CUDA(cudaFree(side));
  for (int b = 0; b < 2; ++b) CHECK_CUDA(cudaFree(me.buf[b]));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Rank me{};
  const char* rankText = getenv("MSCCLPP_NCCL_RANK");
  const char* sizeText = getenv("MSCCLPP_NCCL_WORLD_SIZE");
  ncclUniqueId id;
  if (!rankText || !sizeText || !parseId(getenv("MSCCLPP_NCCL_UNIQUE_ID"), &id)) {
    fprintf(stderr, "FAIL: start under python -m mscclpp_nccl.run\n");
    return 2;
  }
  me.rank = atoi(rankText);
  me.nranks = atoi(sizeText);
  const char* oneStream = getenv("STREAM_ORDER_ONE_STREAM_GROUPS");
  me.oneStreamGroups = oneStream && atoi(oneStream) != 0;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_NCCL(ncclCommInitRank(&me.comm, me.nranks, id, me.rank));
  for (cudaStream_t& s : me.streams) CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<size_t> counts = {1000, 262147};  // packets, then chunks
  if (argc > 1) counts.assign(argc - 1, 0);
  for (int i = 1; i < argc; ++i) counts[i - 1] = strtoull(argv[i], nullptr, 10);
  for (size_t count : counts) {
    if (!runChain(me, count)) return 1;
    printf("PASS stream_order count=%zu\n", count);
  }
  CHECK_NCCL(ncclCommDestroy(me.comm));
  return 0;
}
