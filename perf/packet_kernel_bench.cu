// The packet kernels alone: N ranks simulated in one process on one GPU, each with its own stream,
// scratch, step counters and wait words, launched through the library's own launchers
// (launchAllReduceOneShotPacket, launchAllReduceTwoShotPacket, launchReduceTwoShotPacket, launchExchange), K
// calls per rank captured into one CUDA graph and replayed. What it leaves out (the host path, MPS, the
// launcher's processes) tells whether a gap between two collectives in perf/nccl_timer's graph column lies in
// their kernels. Sizes are nccl-tests' size column, as in perf/nccl_timer.cu; bf16, sum, root 0. `empty` is
// one empty kernel per rank and call; `all_gather_lean*` the all_gather on the one-shot all-reduce's
// schedule, and two variants (yardsticks). Every output is checked after its timing (rank r's input elements
// are all r + 1): a wrong one, or a kernel that gave up waiting (5 s without progress), ends the run with
// exit status 1.
//
// Build from the repository root (perf/build_packet_bench.sh runs this command, for an experiment's
// patched copy of native/ too):
//   nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -arch=sm_90 -o build/packet_kernel_bench \
//     perf/packet_kernel_bench.cu native/algorithms/exchange_packet.cu \
//     native/algorithms/allreduce_one_shot_packet.cu native/algorithms/allreduce_two_shot_packet.cu \
//     native/algorithms/kernel_launch.cc native/algorithms/launch_completion.cc \
//     native/algorithms/launch_record.cc native/algorithms/collective_names.cc native/collective_plans.cc \
//     native/common/logging.cc native/common/env.cc native/transport/cuda_driver.cc
// Run:  build/packet_kernel_bench NRANKS [MIN_BYTES [MAX_BYTES [BLOCKS [COLLECTIVES]]]]
// (default 8 B-4 KB, 1 block, every collective; COLLECTIVES a comma-separated list of the names below)
// BENCH_TICKET=1 gives every call a ticket to publish, as eager calls have (step_sequence.cuh).
// BENCH_SLOT_PACKETS sets each block's slot per sender (default 2048; the library's at 8 ranks is 1024),
// BENCH_EARLY_BLOCKS the largest grid launched early (default: every grid; the library's is its share of
// the SMs over two, 8 at 8 ranks on one H200): the library's conditions, for a gap between the two.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/exchange.h"
#include "native/algorithms/kernel_launch.h"
#include "native/collective_plans.h"
#include "native/device/dependent_launch.cuh"
#include "native/device/step_sequence.cuh"
#include "native/primitives/packet_layout.h"
#include "native/primitives/packet_primitives.cuh"

using namespace mscclpp_nccl;

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    cudaError_t e = (call);                                                                \
    if (e != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

namespace {

// A positive integer from the environment variable `name`, or `fallback`.
size_t envCount(const char* name, size_t fallback) {
  const char* text = getenv(name);
  const long long value = text ? atoll(text) : 0;
  return value > 0 ? static_cast<size_t>(value) : fallback;
}
constexpr int kCallsPerGraph = 20, kReplays = 20;

__global__ void emptyKernel() {}

// all_gather_lean: the all_gather on the one-shot all-reduce's schedule (each word loaded once and sent
// to every peer, then every rank's word taken in rank order and stored; no tokens, no peer sets, one
// step). Not the library's: a yardstick for what the exchange kernel's generality costs. Variants, to
// tell which part of that generality: _peer_order receives as the exchange does (its own range copied
// first, then one peer after another, nearest first); _args reads everything from ExchangeArgs as the
// exchange does (strides, a scale it never applies) on the lean schedule.
enum class Lean { kPlain, kPeerOrder, kArgs };

template <Lean kVariant>
__global__ void __launch_bounds__(kPacketThreads)
    leanAllGatherKernel(PacketComm comm, ExchangeArgs args, size_t chunkWords, bool early) {
  enterKernel(early);
  using T = __nv_bfloat16;
  const size_t rangeBytes = args.rangeBytes;
  const size_t words = divCeil(rangeBytes, kPacketPayloadBytes);
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);
  __syncthreads();
  PacketStep step(comm, wait, stepFlag(base, 1));
  const size_t first = blockIdx.x * chunkWords;
  const size_t n = first < words ? min(words - first, chunkWords) : 0;
  const char* src = static_cast<const char*>(args.src);
  char* dst = static_cast<char*>(args.dst);
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7) == 0; };
  const bool srcAligned = aligned(src);
  if constexpr (kVariant == Lean::kArgs) {
    const bool scale = args.op.scaling.preMultiply;
    const auto scalar = scale ? loadScalar<T>(args.op.scaling) : typename ElementTraits<T>::Acc(1);
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint2 bits = loadWord<T>(src + comm.rank * args.srcStride, first + i, rangeBytes, srcAligned);
      step.sendToPeers(i, scale ? Word<T>::scale(bits, scalar) : bits);
    }
  } else {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
      step.sendToPeers(i, loadWord<T>(src, first + i, rangeBytes, srcAligned));
  }
  if constexpr (kVariant == Lean::kPeerOrder) {
    char* own = dst + comm.rank * rangeBytes;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
      storeWord<T>(own, first + i, rangeBytes, aligned(own),
                   loadWord<T>(src, first + i, rangeBytes, srcAligned));
    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerBefore(comm.rank, k, comm.nranks);
      char* range = dst + peer * rangeBytes;
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint2 bits;
        if (step.receive(peer, i, &bits)) storeWord<T>(range, first + i, rangeBytes, aligned(range), bits);
      }
    }
  } else {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
      for (int sender = 0; sender < comm.nranks; ++sender) {
        uint2 bits;
        if (sender == comm.rank)
          bits = loadWord<T>(src, first + i, rangeBytes, srcAligned);
        else if (!step.receive(sender, i, &bits))
          break;
        char* range = dst + sender * (kVariant == Lean::kArgs ? args.dstStride : rangeBytes);
        storeWord<T>(range, first + i, rangeBytes, aligned(range), bits);
      }
  }
  endSteps(comm.steps, base, 1, 0);
}

uint16_t bf16Bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);  // exact for the small integers used here
}

float bf16Value(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  memcpy(&value, &wide, sizeof(value));
  return value;
}

struct Rank {
  PacketComm comm;
  cudaStream_t stream;
  void* send;
  void* recv;
  int* hostFlags;  // [abort, error], host-mapped
};

// The call of `collective` that `rank` makes for nccl-tests size `bytes`, as the shim plans it.
ExchangeArgs exchangeCall(const std::string& collective, const Rank& rank, size_t bytes, int nranks) {
  const size_t count = bytes / 2, share = count / nranks;
  const DataType bf16 = DataType::kBfloat16;
  const ReduceOp sum{BinaryOp::kSum, {false, false, nullptr, 0, 1}};
  const int r = rank.comm.rank;
  ExchangeArgs args{};
  if (collective == "all_gather") {
    args = planAllGather(rank.send, rank.recv, share, bf16);
    args.collective = Collective::kAllGather;
  } else if (collective == "reduce_scatter") {
    args = planReduceScatter(rank.send, rank.recv, share, bf16, sum);
    args.collective = Collective::kReduceScatter;
  } else if (collective == "alltoall") {
    args = planAlltoAll(rank.send, rank.recv, share, bf16);
    args.collective = Collective::kAlltoAll;
  } else if (collective == "broadcast") {
    args = planBroadcast(r, rank.send, rank.recv, count, bf16, 0);
    args.collective = Collective::kBroadcast;
  } else if (collective == "reduce") {
    args = planReduce(r, rank.send, rank.recv, count, bf16, sum, 0);
    args.collective = Collective::kReduce;
  } else if (collective == "gather") {
    args = planGather(r, rank.send, rank.recv, share, bf16, 0);
    args.collective = Collective::kGather;
  } else {
    args = planScatter(r, rank.send, rank.recv, share, bf16, 0);
    args.collective = Collective::kScatter;
  }
  return args;
}

// The bytes each rank's grid moves per peer in one step: the exchange's range, the whole one-shot
// all-reduce or rooted message, or a two-shot schedule's segment (a rank's share, rounded up to words as
// the launcher rounds it).
size_t movedBytes(const std::string& collective, size_t bytes, int nranks) {
  if (collective == "all_reduce" || collective == "broadcast" || collective == "reduce") return bytes;
  if (collective.find("two_shot") != std::string::npos)
    return ((bytes + kPacketPayloadBytes - 1) / kPacketPayloadBytes + nranks - 1) / nranks *
           kPacketPayloadBytes;
  return bytes / 2 / nranks * 2;
}

// Checks `rank`'s output of `collective` (inputs as set up in main: rank q's elements are q + 1);
// returns the first wrong element's description, or "" when all are right.
std::string wrongOutput(const std::string& collective, const Rank& rank, size_t bytes, int nranks) {
  const size_t count = bytes / 2, share = count / nranks;
  const int r = rank.comm.rank;
  const float sum = nranks * (nranks + 1) / 2.0f;
  size_t elements = 0;
  auto expected = [&](size_t i) -> float {
    if (collective.rfind("all_reduce", 0) == 0 || collective.rfind("reduce", 0) == 0) return sum;
    if (collective.rfind("all_gather", 0) == 0 || collective == "alltoall" || collective == "gather")
      return static_cast<float>(i / share + 1);  // range q came from rank q
    return 1.0f;                                 // broadcast, scatter: root 0's
  };
  if (collective.rfind("all_reduce", 0) == 0 || collective == "broadcast") elements = count;
  if (collective.rfind("reduce", 0) == 0 && collective != "reduce_scatter") elements = r == 0 ? count : 0;
  if (collective.rfind("all_gather", 0) == 0 || collective == "alltoall") elements = share * nranks;
  if (collective == "gather") elements = r == 0 ? share * nranks : 0;
  if (collective == "reduce_scatter" || collective == "scatter") elements = share;
  std::vector<uint16_t> out(elements);
  if (elements == 0) return "";
  CHECK_CUDA(cudaMemcpy(out.data(), rank.recv, elements * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < elements; ++i)
    if (bf16Value(out[i]) != expected(i))
      return "element " + std::to_string(i) + " is " + std::to_string(bf16Value(out[i])) + ", expected " +
             std::to_string(expected(i));
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s NRANKS [MIN_BYTES [MAX_BYTES [BLOCKS [COLLECTIVES]]]]\n", argv[0]);
    return 2;
  }
  const int nranks = atoi(argv[1]);
  const size_t minBytes = argc > 2 ? strtoull(argv[2], nullptr, 0) : 8;
  const size_t maxBytes = argc > 3 ? strtoull(argv[3], nullptr, 0) : 4096;
  const int blocks = argc > 4 ? atoi(argv[4]) : 1;
  const uint64_t ticket = envCount("BENCH_TICKET", 0) ? 1 : 0;
  const size_t slotPackets = envCount("BENCH_SLOT_PACKETS", 2048);
  const int earlyBlocks = static_cast<int>(envCount("BENCH_EARLY_BLOCKS", kMaxPacketBlocks));
  const std::string only = argc > 5 ? std::string(",") + argv[5] + "," : "";
  if (nranks < 2 || blocks < 1 || blocks > kMaxPacketBlocks || minBytes < 8 || maxBytes < minBytes) {
    fprintf(stderr, "need 2 or more ranks, 1-%d blocks and 8 <= MIN_BYTES <= MAX_BYTES\n", kMaxPacketBlocks);
    return 2;
  }
  CHECK_CUDA(cudaSetDevice(0));

  std::vector<Rank> ranks(nranks);
  std::vector<void*> scratch(nranks);
  const size_t scratchBytes = packetScratchBytes(nranks, slotPackets);
  for (void*& s : scratch) {
    CHECK_CUDA(cudaMalloc(&s, scratchBytes));
    CHECK_CUDA(cudaMemset(s, 0, scratchBytes));
  }
  void** peerTable = nullptr;  // every rank's scratch, one table for all (the process maps them alike)
  CHECK_CUDA(cudaMalloc(&peerTable, nranks * sizeof(void*)));
  CHECK_CUDA(cudaMemcpy(peerTable, scratch.data(), nranks * sizeof(void*), cudaMemcpyHostToDevice));
  for (int r = 0; r < nranks; ++r) {
    Rank& rank = ranks[r];
    uint64_t* counters = nullptr;  // steps per block, blocks done, ticket, stop word
    CHECK_CUDA(cudaMalloc(&counters, (kMaxPacketBlocks + 3) * sizeof(uint64_t)));
    CHECK_CUDA(cudaMemset(counters, 0, (kMaxPacketBlocks + 3) * sizeof(uint64_t)));
    CHECK_CUDA(cudaHostAlloc(&rank.hostFlags, 2 * sizeof(int), cudaHostAllocMapped));
    rank.hostFlags[0] = rank.hostFlags[1] = 0;
    int* deviceFlags = nullptr;
    CHECK_CUDA(cudaHostGetDevicePointer(&deviceFlags, rank.hostFlags, 0));
    PacketComm& comm = rank.comm;
    comm.rank = r;
    comm.nranks = nranks;
    comm.localScratch = scratch[r];
    comm.peerScratch = peerTable;
    comm.slotPackets = slotPackets;
    comm.steps.value = counters;
    comm.steps.blocksDone = reinterpret_cast<unsigned*>(counters + kMaxPacketBlocks);
    comm.steps.ticket = counters + kMaxPacketBlocks + 1;
    comm.wait.abortFlag = deviceFlags;
    comm.wait.errorFlag = deviceFlags + 1;
    comm.wait.stopped = reinterpret_cast<int*>(counters + kMaxPacketBlocks + 2);
    comm.wait.timeoutNs = 5'000'000'000ull;  // a broken variant fails in seconds instead of hanging
    comm.wait.rank = r;
    CHECK_CUDA(cudaStreamCreateWithFlags(&rank.stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&rank.send, maxBytes));
    CHECK_CUDA(cudaMalloc(&rank.recv, maxBytes));
    // Every element of rank r's input is r + 1 (exact in bf16, and so are the sums of up to 22 ranks).
    const uint16_t value = bf16Bits(static_cast<float>(r + 1));
    std::vector<uint16_t> input(maxBytes / 2, value);
    CHECK_CUDA(cudaMemcpy(rank.send, input.data(), input.size() * 2, cudaMemcpyHostToDevice));
  }
  cudaStream_t origin;
  CHECK_CUDA(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
  cudaEvent_t fork, start, stop;
  std::vector<cudaEvent_t> joins(nranks);
  CHECK_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (cudaEvent_t& join : joins) CHECK_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  printf(
      "# packet_kernel_bench: %d ranks in one process, bf16 sum, %d block(s) x %d threads, %d calls a "
      "graph x %d replays%s, %zu-packet slots, grids of up to %d blocks launched early\n#%15s %12s %12s\n",
      nranks, blocks, kPacketThreads, kCallsPerGraph, kReplays, ticket ? ", tickets published" : "",
      slotPackets, earlyBlocks, "collective", "bytes", "graph_us");
  const char* collectives[] = {"empty",
                               "all_reduce",
                               "all_reduce_two_shot",
                               "reduce_two_shot",
                               "all_gather",
                               "all_gather_lean",
                               "all_gather_lean_peer_order",
                               "all_gather_lean_args",
                               "reduce_scatter",
                               "alltoall",
                               "broadcast",
                               "reduce",
                               "gather",
                               "scatter"};
  for (const char* name : collectives) {
    const std::string collective = name;
    if (!only.empty() && only.find("," + collective + ",") == std::string::npos) continue;
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 2) {
      const size_t moved = movedBytes(collective, bytes, nranks);
      if (moved == 0) continue;                              // less than an element per rank
      if (collective == "empty" && bytes > minBytes) break;  // one size says it
      const size_t words = (moved + kPacketPayloadBytes - 1) / kPacketPayloadBytes;
      const size_t perBlock = (words + blocks - 1) / blocks * kPacketPayloadBytes;
      if (perBlock > slotPackets * kPacketPayloadBytes) break;  // more than one step: not this bench's
      const LaunchShape shape{blocks, kPacketThreads, perBlock, blocks <= earlyBlocks, true};
      auto call = [&](Rank& rank) -> Status {
        if (collective == "empty") {
          emptyKernel<<<blocks, kPacketThreads, 0, rank.stream>>>();
          return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
        }
        if (collective == "all_reduce" || collective == "all_reduce_two_shot") {
          const AllReduceArgs args{rank.send,
                                   rank.recv,
                                   bytes / 2,
                                   DataType::kBfloat16,
                                   ReduceOp{BinaryOp::kSum, {false, false, nullptr, 0, 1}},
                                   ticket};
          return collective == "all_reduce"
                     ? launchAllReduceOneShotPacket(rank.comm, args, shape, rank.stream)
                     : launchAllReduceTwoShotPacket(rank.comm, args, shape, rank.stream);
        }
        if (collective == "reduce_two_shot") {
          ExchangeArgs args = exchangeCall("reduce", rank, bytes, nranks);
          args.ticket = ticket;
          return launchReduceTwoShotPacket(rank.comm, args, shape, rank.stream);
        }
        if (collective.rfind("all_gather_lean", 0) == 0) {
          const ExchangeArgs args = exchangeCall("all_gather", rank, bytes, nranks);
          auto kernel = collective == "all_gather_lean"              ? leanAllGatherKernel<Lean::kPlain>
                        : collective == "all_gather_lean_peer_order" ? leanAllGatherKernel<Lean::kPeerOrder>
                                                                     : leanAllGatherKernel<Lean::kArgs>;
          const cudaError_t err = launchKernel(kernel, blocks, kPacketThreads, true, true, rank.stream,
                                               rank.comm, args, perBlock / kPacketPayloadBytes);
          return err == cudaSuccess ? Status::kSuccess : Status::kCudaError;
        }
        ExchangeArgs args = exchangeCall(collective, rank, bytes, nranks);
        args.ticket = ticket;
        return launchExchange(rank.comm, args, shape, rank.stream);
      };
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CHECK_CUDA(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
      CHECK_CUDA(cudaEventRecord(fork, origin));
      for (Rank& rank : ranks) CHECK_CUDA(cudaStreamWaitEvent(rank.stream, fork, 0));
      for (int k = 0; k < kCallsPerGraph; ++k)
        for (Rank& rank : ranks)
          if (call(rank) != Status::kSuccess) {
            fprintf(stderr, "%s %zu B: the launch failed\n", name, bytes);
            return 1;
          }
      for (int r = 0; r < nranks; ++r) {
        CHECK_CUDA(cudaEventRecord(joins[r], ranks[r].stream));
        CHECK_CUDA(cudaStreamWaitEvent(origin, joins[r], 0));
      }
      CHECK_CUDA(cudaStreamEndCapture(origin, &graph));
      CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      for (Rank& rank : ranks) CHECK_CUDA(cudaMemset(rank.recv, 0, maxBytes));  // no earlier size's output
      CHECK_CUDA(cudaGraphLaunch(exec, origin));                                // warm-up
      CHECK_CUDA(cudaEventRecord(start, origin));
      for (int i = 0; i < kReplays; ++i) CHECK_CUDA(cudaGraphLaunch(exec, origin));
      CHECK_CUDA(cudaEventRecord(stop, origin));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      CHECK_CUDA(cudaGraphExecDestroy(exec));
      CHECK_CUDA(cudaGraphDestroy(graph));
      for (const Rank& rank : ranks)
        if (rank.hostFlags[1] != 0) {
          fprintf(stderr, "%s %zu B: rank %d's kernel gave up waiting (error %d)\n", name, bytes,
                  rank.comm.rank, rank.hostFlags[1]);
          return 1;
        }
      for (const Rank& rank : ranks) {
        const std::string wrong = collective == "empty" ? "" : wrongOutput(collective, rank, bytes, nranks);
        if (!wrong.empty()) {
          fprintf(stderr, "%s %zu B: rank %d's output is wrong: %s\n", name, bytes, rank.comm.rank,
                  wrong.c_str());
          return 1;
        }
      }
      printf(" %15s %12zu %12.2f\n", name, bytes, 1000.0 * ms / (kReplays * kCallsPerGraph));
    }
  }
  return 0;
}
