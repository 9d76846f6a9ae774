// Cost of the pieces of an eager call, one process, one stream: an empty kernel launch with a small
// parameter, with a 3 KiB one (the size of the point-to-point kernel's transfer parts), with the early-launch
// attribute (also with 512 threads, as the library's kernels), and a cudaEventRecord. Each is timed over
// many back-to-back calls, the stream drained between kinds: host time per call (until the last call
// returns), and drained time per call (until the stream is idle), which is the GPU's pace where it
// exceeds the host's. Run alone or under MPS beside other processes (the GPU's pace is then shared).
// Then a kernel that runs 2 us, as a small collective does, entering and leaving as the library's do:
// plainly, launched early (waiting for the previous kernel, then letting the next start), and early with
// an eager call's ticket at its end (native/device/step_sequence.cuh); eagerly and as graphs of 20 calls.
// Its drained time per call less 2 us is what the GPU spends between two kernels of one stream.
// And the early launch through the driver's cuLaunchKernelEx, with the kernel's CUfunction looked up
// once, against the runtime's cudaLaunchKernelEx, which is handed the kernel's host address each call.
// And the host cost of the other CUDA calls an eager call of the library makes (cudaGetDevice,
// cudaStreamGetCaptureInfo twice: once for the call order, once for the launch), alone and around a launch.
// Build: nvcc -O2 -arch=sm_90 -I. -o build/launch_cost_bench perf/launch_cost_bench.cu
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "native/device/dependent_launch.cuh"
#include "native/device/step_sequence.cuh"

struct Small {
  long words[8];
};
struct Large {
  long words[384];  // 3 KiB
};

__global__ void smallKernel(Small s) {
  if (s.words[0] == 42 && threadIdx.x == 1000) printf("never\n");
}
__global__ void largeKernel(Large l) {
  if (l.words[0] == 42 && threadIdx.x == 1000) printf("never\n");
}

// Runs `ns` nanoseconds on one block, entered and left with the library's own code: enterKernel(early)
// (native/device/dependent_launch.cuh) and endCall (step_sequence.cuh), which publishes `ticket` if
// nonzero.
struct Spin {
  long long ns;
  bool early;
  uint64_t ticket;
  mscclpp_nccl::StepCounter counter;
};
__global__ void spinKernel(Spin s) {
  mscclpp_nccl::enterKernel(s.early);
  long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < s.ns);
  mscclpp_nccl::endCall(s.counter, s.ticket);
}

struct PerCall {
  double hostUs, drainedUs;
};

template <typename F>
PerCall perCall(cudaStream_t stream, int calls, F&& call) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 100; ++i) call();
  cudaStreamSynchronize(stream);
  auto start = Clock::now();
  for (int i = 0; i < calls; ++i) call();
  const double host = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  cudaStreamSynchronize(stream);
  const double drained = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  return {host / calls, drained / calls};
}

template <typename F>
void report(const char* what, cudaStream_t stream, int calls, F&& call) {
  const PerCall t = perCall(stream, calls, call);
  printf("  %-44s %6.2f %8.2f\n", what, t.hostUs, t.drainedUs);
}

int main(int argc, char** argv) {
  const int calls = argc > 1 ? atoi(argv[1]) : 20000;
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaEvent_t event;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  uint64_t* counters = nullptr;  // the spin kernel's blocks done, then its ticket word
  cudaMalloc(&counters, 2 * sizeof(uint64_t));
  cudaMemset(counters, 0, 2 * sizeof(uint64_t));
  const mscclpp_nccl::StepCounter spinCounter{nullptr, reinterpret_cast<unsigned*>(counters), counters + 1};
  Small s{};
  Large l{};
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1);
  config.blockDim = dim3(32);
  config.stream = stream;
  cudaLaunchAttribute early = {};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  auto launch = [&](auto kernel, const auto& param, bool withEarly, int threads = 32) {
    config.blockDim = dim3(threads);
    config.attrs = withEarly ? &early : nullptr;
    config.numAttrs = withEarly ? 1 : 0;
    cudaLaunchKernelEx(&config, kernel, param);
  };
  // The driver's launch, with the kernel's handle and the attribute set up once.
  PFN_cuLaunchKernelEx_v11060 driverLaunch = nullptr;
  cudaDriverEntryPointQueryResult found;
  cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", reinterpret_cast<void**>(&driverLaunch), 11060,
                                   cudaEnableDefault, &found);
  cudaFunction_t smallFunction = nullptr;
  cudaGetFuncBySymbol(&smallFunction, reinterpret_cast<const void*>(smallKernel));
  CUlaunchAttribute driverEarly = {};
  driverEarly.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  driverEarly.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig driverConfig = {};
  driverConfig.gridDimX = driverConfig.gridDimY = driverConfig.gridDimZ = 1;
  driverConfig.blockDimY = driverConfig.blockDimZ = 1;
  driverConfig.hStream = stream;
  driverConfig.attrs = &driverEarly;
  driverConfig.numAttrs = 1;
  auto launchThroughDriver = [&](int threads) {
    driverConfig.blockDimX = threads;
    void* params[] = {&s};
    driverLaunch(&driverConfig, reinterpret_cast<CUfunction>(smallFunction), params, nullptr);
  };
  for (int pass = 0; pass < 2; ++pass) {
    printf("pass %d (us per call over %d calls: host, drained)\n", pass, calls);
    report("launch, 64 B parameter", stream, calls, [&] { launch(smallKernel, s, false); });
    report("launch, 3 KiB parameter", stream, calls, [&] { launch(largeKernel, l, false); });
    report("launch, 64 B, early attribute", stream, calls, [&] { launch(smallKernel, s, true); });
    report("launch, 3 KiB, early attribute", stream, calls, [&] { launch(largeKernel, l, true); });
    report("launch, 64 B, early, 512 threads", stream, calls, [&] { launch(smallKernel, s, true, 512); });
    if (driverLaunch != nullptr && smallFunction != nullptr) {
      report("driver launch, 64 B, early", stream, calls, [&] { launchThroughDriver(32); });
      report("driver launch, 64 B, early, 512 thr", stream, calls, [&] { launchThroughDriver(512); });
    }
    report("launch 64 B + event record", stream, calls, [&] {
      launch(smallKernel, s, true);
      cudaEventRecord(event, stream);
    });
    report("event record alone", stream, calls, [&] { cudaEventRecord(event, stream); });
    int device = 0;
    report("cudaGetDevice", stream, calls, [&] { cudaGetDevice(&device); });
    cudaStreamCaptureStatus status;
    unsigned long long captureId = 0;
    report("cudaStreamGetCaptureInfo", stream, calls,
           [&] { cudaStreamGetCaptureInfo(stream, &status, &captureId); });
    report("launch 64 B early, 512 thr + 2 info + device", stream, calls, [&] {
      cudaGetDevice(&device);
      cudaStreamGetCaptureInfo(stream, &status, &captureId);
      cudaStreamGetCaptureInfo(stream, &status, &captureId);
      launch(smallKernel, s, true, 512);
    });
    for (int kind = 0; kind < 3; ++kind) {
      const Spin spin{2000, kind > 0, kind > 1 ? 1u : 0u, spinCounter};
      static const char* names[] = {"spin 2 us, plain", "spin 2 us, early", "spin 2 us, early, ticket"};
      auto call = [&] { launch(spinKernel, spin, kind > 0, 512); };
      report(names[kind], stream, calls / 10, call);
      cudaGraph_t graph;  // the same 20 calls captured, as a graph replay runs them
      cudaGraphExec_t exec;
      cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      for (int i = 0; i < 20; ++i) call();
      cudaStreamEndCapture(stream, &graph);
      cudaGraphInstantiate(&exec, graph, 0);
      PerCall t = perCall(stream, calls / 200, [&] { cudaGraphLaunch(exec, stream); });
      printf("  %-44s %6.2f %8.2f\n", (std::string(names[kind]) + ", graph").c_str(), t.hostUs / 20,
             t.drainedUs / 20);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
