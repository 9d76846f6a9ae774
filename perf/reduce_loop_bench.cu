// The zero-copy all-reduce's inner loop alone, in one process with no barriers: N "ranks" of one
// kernel (grid = N x blocks-per-rank), each reducing its segment of N inputs and storing the result into
// N outputs, as allreduce_direct.cuh does across processes. Times schedules of that loop against a
// plain copy of the same bytes, so a gap between the library's reduce and its copy can be traced to the
// loop rather than to barriers, MPS or launch order.
//
// Build:  nvcc -std=c++17 -O3 -I. --expt-relaxed-constexpr -gencode arch=compute_90,code=sm_90 \
//             -o build/reduce_loop_bench perf/reduce_loop_bench.cu
// Run:    build/reduce_loop_bench [MB per rank, default 32; fractions allowed] [blocks per rank, default
//         the SMs shared evenly] [alias]
// With `alias`, every buffer is cuMem memory that the kernels reach through a second mapping of the same
// allocation, as a peer's buffer is reached through its imported handle.
// Prints, per rank count and schedule: microseconds per call and GB/s of traffic (each rank reads its
// segment of every input and writes it to every output: 2 N S bytes for S bytes per rank), then the
// reduce-to-one pattern of reduce and reduce_scatter (each rank writes its segment once: (N + 1) S bytes).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "native/primitives/chunk_primitives.cuh"

using namespace mscclpp_nccl;

namespace {

constexpr int kMaxRanks = 8;
constexpr int kThreads = 512;

struct Buffers {
  const char* inputs[kMaxRanks];
  char* outputs[kMaxRanks];
  int nranks;
  size_t bytes;   // per rank
  int alignment;  // 16, but known only at run time (as the library's per-buffer alignments are)
};

// The block's part of its rank's segment, as locatePart does.
struct Part {
  int me;
  size_t start, length;
};

__device__ Part partOf(const Buffers& b, int blocksPerRank) {
  Part p;
  p.me = blockIdx.x / blocksPerRank;
  const size_t segment = (b.bytes / b.nranks + 15) / 16 * 16;
  const size_t blockBytes = (segment / blocksPerRank + 15) / 16 * 16;
  p.start = p.me * segment + (blockIdx.x % blocksPerRank) * blockBytes;
  size_t end = min(b.bytes, min((p.me + 1) * segment, p.start + blockBytes));
  p.length = p.start < end ? end - p.start : 0;
  return p;
}

// Asks the copy engine of the SM (TMA) to bring `bytes` (a multiple of 16, 16-byte aligned) into L2, so
// that the loop's loads that follow hit L2 instead of each waiting out a DRAM latency.
__device__ __forceinline__ void prefetchL2(const void* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 1u << 20) {
    const uint32_t n = static_cast<uint32_t>(min(bytes - off, size_t(1) << 20));
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(static_cast<const char*>(p) + off), "r"(n)
                 : "memory");
  }
}

// One thread per rank asks for the block's part of that rank's input in L2 (the schedules with kPrefetch).
__device__ __forceinline__ void prefetchPart(const Buffers& b, const Part& p) {
  if (threadIdx.x < b.nranks) prefetchL2(b.inputs[threadIdx.x] + p.start, (p.length + 15) / 16 * 16);
}

// Schedule 0: the library's reduceUnits, kGroup ranks' kUnroll units in flight (the library has used
// kGroup 1: one rank's 8 units at a time).
// kConstantAlignment: the alignment is the constant 16, so the compiler drops the unaligned paths.
// kPrefetch: the block's parts of the inputs are asked for in L2 first (prefetchPart).
template <typename T, int kUnroll, int kGroup, bool kConstantAlignment = true, bool kPrefetch = false>
__global__ void __launch_bounds__(kThreads) reduceLibrary(Buffers b, int blocksPerRank) {
  const Part p = partOf(b, blocksPerRank);
  if (kPrefetch) prefetchPart(b, p);
  const int alignment = kConstantAlignment ? 16 : b.alignment;
  reduceUnits<T, OpSum, kUnroll, kGroup>(
      (p.length + 15) / 16, b.nranks, 1,
      [&](int r, size_t i) { return loadUnit<T>(b.inputs[r] + p.start, i, p.length, alignment); },
      [&](size_t i, Unit u) {
        for (int k = 0; k < b.nranks; ++k)
          storeUnit<T>(b.outputs[(p.me + k) % b.nranks] + p.start, i, p.length, alignment, u);
      });
}

// The reduce and reduce-scatter pattern: as reduceLibrary, but the result goes to this rank's output
// only, so reads outnumber writes nranks to one.
template <typename T, int kUnroll, int kGroup, bool kPrefetch = false>
__global__ void __launch_bounds__(kThreads) reduceToOne(Buffers b, int blocksPerRank) {
  const Part p = partOf(b, blocksPerRank);
  if (kPrefetch) prefetchPart(b, p);
  reduceUnits<T, OpSum, kUnroll, kGroup>(
      (p.length + 15) / 16, b.nranks, 1,
      [&](int r, size_t i) { return loadUnit<T>(b.inputs[r] + p.start, i, p.length, 16); },
      [&](size_t i, Unit u) { storeUnit<T>(b.outputs[p.me] + p.start, i, p.length, 16, u); });
}

// Schedule 1: every rank's loads of kUnroll units issued before any is used (kRanks fixed).
template <typename T, int kRanks, int kUnroll>
__global__ void __launch_bounds__(kThreads) reduceAllRanksFirst(Buffers b, int blocksPerRank) {
  const Part p = partOf(b, blocksPerRank);
  const size_t units = (p.length + 15) / 16;
  for (size_t base = threadIdx.x; base < units; base += kUnroll * blockDim.x) {
    Unit unit[kRanks][kUnroll];
#pragma unroll
    for (int r = 0; r < kRanks; ++r)
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        unit[r][k] = base + k * blockDim.x < units
                         ? loadUnit<T>(b.inputs[r] + p.start, base + k * blockDim.x, p.length, 16)
                         : Unit{};
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      UnitReduction<T, OpSum> red;
      red.first(unit[0][k]);
#pragma unroll
      for (int r = 1; r < kRanks; ++r) red.add(unit[r][k]);
      const Unit u = red.result(1);
      if (base + k * blockDim.x < units)
#pragma unroll
        for (int j = 0; j < kRanks; ++j)
          storeUnit<T>(b.outputs[(p.me + j) % kRanks] + p.start, base + k * blockDim.x, p.length, 16, u);
    }
  }
}

// Schedule 2: a copy of the same bytes (rank me's segment of every input to its own output), as the
// all-gather's pull does.
template <typename T>
__global__ void __launch_bounds__(kThreads) copySameBytes(Buffers b, int blocksPerRank) {
  const Part p = partOf(b, blocksPerRank);
  for (int k = 0; k < b.nranks; ++k) {
    const int r = (p.me + k) % b.nranks;
    copyChunk<T>(userChunk(b.outputs[r] + p.start, p.length), userChunk(b.inputs[r] + p.start, p.length),
                 p.length, false, 1.0f);
  }
}

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e = (call);                                                          \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

template <typename Kernel>
double timeKernel(Kernel kernel, const Buffers& b, int blocksPerRank) {
  const int grid = b.nranks * blocksPerRank;
  for (int i = 0; i < 3; ++i) kernel<<<grid, kThreads>>>(b, blocksPerRank);
  CHECK(cudaGetLastError());
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  const int iters = 20;
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) kernel<<<grid, kThreads>>>(b, blocksPerRank);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  return ms * 1000.0 / iters;
}

// Checks output 0 against the host sum of the inputs (bf16 values that sum exactly).
bool checkOutputs(const Buffers& b) {
  const size_t n = b.bytes / 2;
  std::vector<__nv_bfloat16> out(n);
  for (int r = 0; r < b.nranks; ++r) {
    CHECK(cudaMemcpy(out.data(), b.outputs[r], b.bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += 997) {
      float expect = 0;
      for (int s = 0; s < b.nranks; ++s) expect += float((i + s) % 7);
      if (__bfloat162float(out[i]) != expect) return false;
    }
  }
  return true;
}

bool useAlias = false;

// `bytes` of device memory: cudaMalloc's, or (useAlias) a cuMem allocation mapped twice, the second
// mapping returned.
char* allocate(size_t bytes) {
  if (!useAlias) {
    char* p;
    CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  // The driver's calls through the runtime, so that the tool links without libcuda.
  auto driver = [](const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult query;
    CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &query));
    return fn;
  };
  static auto memCreate = reinterpret_cast<decltype(&cuMemCreate)>(driver("cuMemCreate"));
  static auto reserve = reinterpret_cast<decltype(&cuMemAddressReserve)>(driver("cuMemAddressReserve"));
  static auto map = reinterpret_cast<decltype(&cuMemMap)>(driver("cuMemMap"));
  static auto setAccess = reinterpret_cast<decltype(&cuMemSetAccess)>(driver("cuMemSetAccess"));
  static auto granularityOf =
      reinterpret_cast<decltype(&cuMemGetAllocationGranularity)>(driver("cuMemGetAllocationGranularity"));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  granularityOf(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle;
  CUdeviceptr first, second;
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (memCreate(&handle, size, &prop, 0) != CUDA_SUCCESS || reserve(&first, size, 0, 0, 0) ||
      reserve(&second, size, 0, 0, 0) || map(first, size, 0, handle, 0) || map(second, size, 0, handle, 0) ||
      setAccess(first, size, &access, 1) || setAccess(second, size, &access, 1)) {
    std::fprintf(stderr, "cuMem allocation failed\n");
    std::exit(1);
  }
  return reinterpret_cast<char*>(second);
}

template <int kRanks>
void runRanks(size_t bytes, int sms, int blocksPerRankGiven) {
  Buffers b{};
  b.nranks = kRanks;
  b.bytes = bytes;
  b.alignment = 16;
  std::vector<__nv_bfloat16> host(bytes / 2);
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < host.size(); ++i) host[i] = __float2bfloat16(float((i + r) % 7));
    char* in = allocate(bytes);
    CHECK(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice));
    b.inputs[r] = in;
    b.outputs[r] = allocate(bytes);
  }
  const int blocksPerRank = blocksPerRankGiven > 0 ? blocksPerRankGiven : sms / kRanks;
  const double traffic = 2.0 * kRanks * bytes;
  auto report = [&](const char* name, double us, bool ok) {
    std::printf("ranks %d  %-28s %8.1f us  %7.0f GB/s  %s\n", kRanks, name, us, traffic / us / 1e3,
                ok ? "exact" : "WRONG");
  };
  double us = timeKernel(reduceLibrary<__nv_bfloat16, 8, 1>, b, blocksPerRank);
  report("reduceUnits 8 units x 1 rank", us, checkOutputs(b));
  us = timeKernel(reduceLibrary<__nv_bfloat16, 8, 1, false>, b, blocksPerRank);
  report("8 units x 1 rank, run-time 16", us, checkOutputs(b));
  us = timeKernel(reduceLibrary<__nv_bfloat16, 2, 8, false>, b, blocksPerRank);
  report("2 units x 8 ranks, run-time 16", us, checkOutputs(b));
  us = timeKernel(reduceLibrary<__nv_bfloat16, 4, 4>, b, blocksPerRank);
  report("reduceUnits 4 units x 4 ranks", us, checkOutputs(b));
  us = timeKernel(reduceLibrary<__nv_bfloat16, 2, 8>, b, blocksPerRank);
  report("reduceUnits 2 units x 8 ranks", us, checkOutputs(b));
  us = timeKernel(reduceLibrary<__nv_bfloat16, 8, 2>, b, blocksPerRank);
  report("reduceUnits 8 units x 2 ranks", us, checkOutputs(b));
  us = timeKernel(reduceAllRanksFirst<__nv_bfloat16, kRanks, 16 / kRanks>, b, blocksPerRank);
  report("all ranks first, 16 loads", us, checkOutputs(b));
  us = timeKernel(reduceAllRanksFirst<__nv_bfloat16, kRanks, (32 / kRanks > 8 ? 8 : 32 / kRanks)>, b,
                  blocksPerRank);
  report("all ranks first, 32 loads", us, checkOutputs(b));
  us = timeKernel(reduceLibrary<__nv_bfloat16, 8, 1>, b, 2 * blocksPerRank);
  report("8 units x 1 rank, 2x blocks", us, checkOutputs(b));
  us = timeKernel(reduceLibrary<__nv_bfloat16, 2, 8, true, true>, b, blocksPerRank);
  report("2 units x 8 ranks, L2 prefetch", us, checkOutputs(b));
  us = timeKernel(copySameBytes<__nv_bfloat16>, b, blocksPerRank);
  report("copy, same bytes", us, true);
  // Reduce-to-one: nranks reads per write; traffic (nranks + 1) x S.
  const double oneTraffic = (kRanks + 1.0) * bytes;
  auto reportOne = [&](const char* name, double t) {
    std::printf("ranks %d  to one: %-20s %8.1f us  %7.0f GB/s\n", kRanks, name, t, oneTraffic / t / 1e3);
  };
  reportOne("2 units x 8 ranks", timeKernel(reduceToOne<__nv_bfloat16, 2, 8>, b, blocksPerRank));
  reportOne("2 units x 8, 2x blocks", timeKernel(reduceToOne<__nv_bfloat16, 2, 8>, b, 2 * blocksPerRank));
  reportOne("4 units x 2 ranks", timeKernel(reduceToOne<__nv_bfloat16, 4, 2>, b, blocksPerRank));
  reportOne("4 x 2, L2 prefetch", timeKernel(reduceToOne<__nv_bfloat16, 4, 2, true>, b, blocksPerRank));
  reportOne("4 units x 4 ranks", timeKernel(reduceToOne<__nv_bfloat16, 4, 4>, b, blocksPerRank));
  reportOne("8 units x 1 rank", timeKernel(reduceToOne<__nv_bfloat16, 8, 1>, b, blocksPerRank));
  reportOne("8 units x 2 ranks", timeKernel(reduceToOne<__nv_bfloat16, 8, 2>, b, blocksPerRank));
  reportOne("1 unit x 8 ranks", timeKernel(reduceToOne<__nv_bfloat16, 1, 8>, b, blocksPerRank));
  for (int r = 0; r < kRanks && !useAlias; ++r) {  // cuMem memory is left to the process's exit
    CHECK(cudaFree(const_cast<char*>(b.inputs[r])));
    CHECK(cudaFree(b.outputs[r]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = static_cast<size_t>((argc > 1 ? std::atof(argv[1]) : 32.0) * (1 << 20)) / 256 * 256;
  const int blocksPerRank = argc > 2 ? std::atoi(argv[2]) : 0;
  useAlias = argc > 3 && std::string(argv[3]) == "alias";
  CHECK(cudaFree(nullptr));  // the runtime's context, which the driver's calls use
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, %zu KB per rank, %d blocks per rank (0: SMs / ranks), %s\n", prop.name,
              prop.multiProcessorCount, bytes >> 10, blocksPerRank,
              useAlias ? "cuMem through a second mapping" : "cudaMalloc");
  runRanks<2>(bytes, prop.multiProcessorCount, blocksPerRank);
  runRanks<4>(bytes, prop.multiProcessorCount, blocksPerRank);
  runRanks<8>(bytes, prop.multiProcessorCount, blocksPerRank);
  return 0;
}
