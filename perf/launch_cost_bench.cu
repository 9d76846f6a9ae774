// Host cost of the pieces of an eager call, one process, one stream: an empty kernel launch with a small
// parameter, with a 3 KiB one (the size of the point-to-point kernel's lanes), with the early-launch
// attribute, and a cudaEventRecord. Each is timed over many back-to-back calls, the stream drained
// between kinds. Run alone or under MPS beside other processes.
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

template <typename F>
double perCallUs(cudaStream_t stream, int calls, F&& call) {
  for (int i = 0; i < 100; ++i) call();
  cudaStreamSynchronize(stream);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  cudaStreamSynchronize(stream);
  return us / calls;
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
  auto launch = [&](auto kernel, const auto& param, bool withEarly) {
    config.attrs = withEarly ? &early : nullptr;
    config.numAttrs = withEarly ? 1 : 0;
    cudaLaunchKernelEx(&config, kernel, param);
  };
  for (int pass = 0; pass < 2; ++pass) {
    printf("pass %d (us of host time per call, %d calls)\n", pass, calls);
    printf("  launch, 64 B parameter           %6.2f\n",
           perCallUs(stream, calls, [&] { launch(smallKernel, s, false); }));
    printf("  launch, 3 KiB parameter          %6.2f\n",
           perCallUs(stream, calls, [&] { launch(largeKernel, l, false); }));
    printf("  launch, 64 B, early attribute    %6.2f\n",
           perCallUs(stream, calls, [&] { launch(smallKernel, s, true); }));
    printf("  launch, 3 KiB, early attribute   %6.2f\n",
           perCallUs(stream, calls, [&] { launch(largeKernel, l, true); }));
    printf("  launch 64 B + event record       %6.2f\n", perCallUs(stream, calls, [&] {
             launch(smallKernel, s, true);
             cudaEventRecord(event, stream);
           }));
    printf("  event record alone               %6.2f\n",
           perCallUs(stream, calls, [&] { cudaEventRecord(event, stream); }));
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
