// Whether streams held up behind waits keep other streams' kernels from starting, with several processes
// sharing one GPU. Each process holds `--held` streams: on each, a kernel that spins until the host
// releases it (`--hold kernel`, as a collective waiting for its peers) or a stream memory wait on a host
// word (`--hold wait`, as a call waiting for its communicator's previous one on another stream), and
// behind it a second kernel, so that the stream has work queued behind the wait. Then it launches one
// small kernel on a stream of its own and reports how long that kernel took to finish, or that it did
// not within the limit.
//
// What it shows (perf/mps-stream-probe-2026-12-05.csv): a process's streams take its hardware work queues
// in turn, and a stream that shares a queue with a waiting one does not start. An MPS client has 2 queues
// unless CUDA_DEVICE_MAX_CONNECTIONS asks for more; with c asked, the free kernel runs behind c - 1 held
// streams and starves behind c. This is why the launcher gives MPS ranks 8 (mscclpp_nccl/run.py).
//
// Build: nvcc -O2 -arch=sm_90 -o build/mps_stream_probe perf/mps_stream_probe.cu -lcuda
// Run:   for i in $(seq 8); do build/mps_stream_probe --held 4 --hold wait & done; wait
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

__global__ void spinUntilReleased(const volatile int* release) {
  while (*release == 0) {
  }
}

__global__ void markDone(int* word) { *word = 1; }

bool check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "mps_stream_probe: %s: %s\n", what, cudaGetErrorString(err));
  return false;
}

// Milliseconds until `stream` is idle, or -1 after `limitMs`.
double msUntilIdle(cudaStream_t stream, int limitMs) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (cudaStreamQuery(stream) == cudaSuccess) break;
    if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(limitMs)) return -1;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int held = 4, limitMs = 3000, settleMs = 500;
  bool holdWithKernels = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--held")) held = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--hold")) holdWithKernels = std::strcmp(argv[i + 1], "wait") != 0;
    if (!std::strcmp(argv[i], "--limit-ms")) limitMs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--settle-ms")) settleMs = std::atoi(argv[i + 1]);
  }
  int* release = nullptr;
  int* releaseOnDevice = nullptr;
  int* words = nullptr;
  if (!check(cudaHostAlloc(&release, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc") ||
      !check(cudaHostGetDevicePointer(&releaseOnDevice, release, 0), "cudaHostGetDevicePointer") ||
      !check(cudaMalloc(&words, sizeof(int) * (held + 1)), "cudaMalloc"))
    return 1;
  // Both kernels run once before the test, so that loading them on first launch plays no part.
  *release = 1;
  spinUntilReleased<<<1, 32>>>(releaseOnDevice);
  markDone<<<1, 1>>>(words);
  if (!check(cudaDeviceSynchronize(), "warm-up")) return 1;
  *release = 0;

  std::vector<cudaStream_t> streams(held + 1);
  for (cudaStream_t& s : streams)
    if (!check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
  for (int i = 0; i < held; ++i) {
    if (holdWithKernels) {
      spinUntilReleased<<<1, 32, 0, streams[i]>>>(releaseOnDevice);
    } else if (cuStreamWaitValue32(reinterpret_cast<CUstream>(streams[i]),
                                   reinterpret_cast<CUdeviceptr>(releaseOnDevice), 1,
                                   CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
      std::fprintf(stderr, "mps_stream_probe: cuStreamWaitValue32 failed\n");
      return 1;
    }
    markDone<<<1, 1, 0, streams[i]>>>(words + i);
  }
  // Give the other processes time to hold their streams too.
  std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
  markDone<<<1, 1, 0, streams[held]>>>(words + held);
  const double ms = msUntilIdle(streams[held], limitMs);
  *release = 1;
  const bool drained = check(cudaDeviceSynchronize(), "drain");
  if (ms < 0)
    std::printf("pid %d: %d streams held by %s: the free stream's kernel did not finish within %d ms\n",
                getpid(), held, holdWithKernels ? "kernels" : "waits", limitMs);
  else
    std::printf("pid %d: %d streams held by %s: the free stream's kernel finished after %.2f ms\n", getpid(),
                held, holdWithKernels ? "kernels" : "waits", ms);
  return drained ? 0 : 1;
}
