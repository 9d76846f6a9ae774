// Cost of the pieces of an eager call, one process, one stream: an empty kernel launch with a small
// parameter, with a 3 KiB one (the size of the point-to-point kernel's lanes), with the early-launch
// attribute (also with 512 threads, as the library's kernels), and a cudaEventRecord. Each is timed over
// many back-to-back calls, the stream drained between kinds: host time per call (until the last call
// returns), and drained time per call (until the stream is idle), which is the GPU's pace where it
// exceeds the host's. Run alone or under MPS beside other processes (the GPU's pace is then shared).
// Build: nvcc -O2 -o build/launch_cost_bench perf/launch_cost_bench.cu
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

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
  printf("  %-32s %6.2f %8.2f\n", what, t.hostUs, t.drainedUs);
}

int main(int argc, char** argv) {
  const int calls = argc > 1 ? atoi(argv[1]) : 20000;
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaEvent_t event;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
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
  for (int pass = 0; pass < 2; ++pass) {
    printf("pass %d (us per call over %d calls: host, drained)\n", pass, calls);
    report("launch, 64 B parameter", stream, calls, [&] { launch(smallKernel, s, false); });
    report("launch, 3 KiB parameter", stream, calls, [&] { launch(largeKernel, l, false); });
    report("launch, 64 B, early attribute", stream, calls, [&] { launch(smallKernel, s, true); });
    report("launch, 3 KiB, early attribute", stream, calls, [&] { launch(largeKernel, l, true); });
    report("launch, 64 B, early, 512 threads", stream, calls, [&] { launch(smallKernel, s, true, 512); });
    report("launch 64 B + event record", stream, calls, [&] {
      launch(smallKernel, s, true);
      cudaEventRecord(event, stream);
    });
    report("event record alone", stream, calls, [&] { cudaEventRecord(event, stream); });
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
