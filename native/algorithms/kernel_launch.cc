#include "native/algorithms/kernel_launch.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "native/algorithms/launch_completion.h"
#include "native/algorithms/launch_record.h"
#include "native/transport/cuda_driver.h"

namespace mscclpp_nccl {
namespace {

// The early-launch attribute on a launch lets the kernel start once the stream's previous kernel lets
// it (its enterKernel() still waits for that kernel to finish). It also makes the launch itself cheaper:
// under MPS with 8 ranks on one H200, grids that are not launched early took 20-35% less eager time with
// it at 64 KB-4 MB (perf/nccl_timer.cu). A grid too large to start beside a running kernel may
// carry it only where the stream's previous kernel does not let its successor start early: one launched
// early would, and the two together could hold more than the rank's share of SMs. The lock serialises
// the decision with the launch, so that two threads launching on one stream are recorded in the order
// their kernels are queued.
std::mutex& launchLock() {
  static std::mutex lock;
  return lock;
}

// False once a launch failed with the early-launch attribute and succeeded without it: a driver or an
// MPS server that does not support it then gets plain launches from every communicator of the process.
std::atomic<bool> earlyLaunchWorks{true};

// Under launchLock(): whether a grid launched early (`early`) or not may carry the attribute on `stream`,
// which is then recorded as ending in such a kernel. The record is by stream and graph capture (a
// capture orders its own kernels); a stream it does not know, and the default streams (shared between
// threads or devices), may end in any kernel, so only early grids carry it there.
//
// Only our own launches are recorded. Other work queued between two of them (a caller's kernel, a copy,
// a graph launch) cannot make a large grid start beside one of ours: the attribute relaxes a kernel's
// wait on the kernel right before it in the stream only, and a caller's kernel there runs to its end
// whatever our peers do.
bool mayCarryEarlyAttribute(cudaStream_t stream, bool early) {
  // The legacy and per-thread default streams are one handle for several streams.
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return early;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, &capture) != cudaSuccess) {
    cudaGetLastError();  // not sticky; the launch itself reports what is wrong with the stream
    return early;
  }
  static LaunchRecord record;
  return record.mayCarry(stream, status == cudaStreamCaptureStatusActive ? capture : 0, early);
}

// Under launchLock(): the driver's handle of `kernel` in the current context, or null where there is
// none yet (no current context: the runtime's launch makes one). The runtime's own launch finds the
// handle of the kernel's address on every call, which costs 0.2-0.3 us of the 2.7-3.4 us a launch takes
// under MPS on an H200 (perf/launch_cost_bench.cu). A kernel keeps the
// handle of the context it last ran in; contexts are told apart by their id, which the driver never
// gives twice in a process, so a context destroyed and made anew at the same address finds no stale one.
CUfunction driverFunction(const CudaDriver& driver, const void* kernel) {
  struct Known {
    unsigned long long context;
    CUfunction function;
  };
  static std::unordered_map<const void*, Known> known;
  CUcontext context = nullptr;
  unsigned long long contextId = 0;
  if (driver.cuCtxGetCurrent(&context) != CUDA_SUCCESS || context == nullptr ||
      driver.cuCtxGetId(context, &contextId) != CUDA_SUCCESS)
    return nullptr;
  auto it = known.find(kernel);
  if (it != known.end() && it->second.context == contextId) return it->second.function;
  cudaFunction_t function = nullptr;
  if (cudaGetFuncBySymbol(&function, kernel) != cudaSuccess) {
    cudaGetLastError();  // the runtime's launch reports it
    return nullptr;
  }
  known[kernel] = Known{contextId, reinterpret_cast<CUfunction>(function)};
  return reinterpret_cast<CUfunction>(function);
}

// Under launchLock(): one launch, with the early-launch attribute where `attributed` and the
// launch-completion attribute where `completion` is an event. Through the driver where the kernel's
// handle is known; else, and after the driver failed (so that the caller gets the runtime's error, and
// the driver's failure queued nothing), through the runtime.
cudaError_t launchOnce(const void* kernel, int blocks, int threads, cudaStream_t stream, void** params,
                       bool attributed, cudaEvent_t completion) {
  const CudaDriver* driver = cudaDriverOrNull();
  if (CUfunction function = driver ? driverFunction(*driver, kernel) : nullptr) {
    CUlaunchAttribute attributes[2] = {};
    unsigned count = 0;
    if (attributed) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attributes[count++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (completion != nullptr) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
      attributes[count++].value.launchCompletionEvent.event = reinterpret_cast<CUevent>(completion);
    }
    CUlaunchConfig config = {};
    config.gridDimX = static_cast<unsigned>(blocks);
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = static_cast<unsigned>(threads);
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = reinterpret_cast<CUstream>(stream);
    config.attrs = count > 0 ? attributes : nullptr;
    config.numAttrs = count;
    if (driver->cuLaunchKernelEx(&config, function, params, nullptr) == CUDA_SUCCESS) return cudaSuccess;
  }
  cudaLaunchAttribute attributes[2] = {};
  unsigned count = 0;
  if (attributed) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (completion != nullptr) {
    attributes[count].id = cudaLaunchAttributeLaunchCompletionEvent;
    attributes[count++].val.launchCompletionEvent.event = completion;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.stream = stream;
  config.attrs = count > 0 ? attributes : nullptr;
  config.numAttrs = count;
  return cudaLaunchKernelExC(&config, kernel, params);
}

}  // namespace

cudaError_t launchPacked(const void* kernel, int blocks, int threads, bool early, bool programmatic,
                         cudaStream_t stream, void** params) {
  // No kernel: the call's type and operator found none in the shard it looked in (type_shards.cuh).
  if (kernel == nullptr) return cudaErrorInvalidDeviceFunction;
  std::lock_guard<std::mutex> lock(launchLock());
  const bool attributed = (early || programmatic) && mayCarryEarlyAttribute(stream, early) &&
                          earlyLaunchWorks.load(std::memory_order_relaxed);
  const cudaEvent_t completion = LaunchCompletion::eventToCarry();
  cudaError_t err = launchOnce(kernel, blocks, threads, stream, params, attributed, completion);
  // A launch error is not sticky: clear it and try again without what may have caused it, first the
  // caller's event (the attribute takes only events with timing off), then the early-launch attribute.
  if (err != cudaSuccess && completion != nullptr) {
    cudaGetLastError();
    err = launchOnce(kernel, blocks, threads, stream, params, attributed, nullptr);
    if (err == cudaSuccess) LaunchCompletion::refused();
  }
  if (err != cudaSuccess && attributed) {
    cudaGetLastError();
    err = launchOnce(kernel, blocks, threads, stream, params, false, nullptr);
    if (err == cudaSuccess) earlyLaunchWorks.store(false, std::memory_order_relaxed);  // only it failed
  }
  // A failed launch queued nothing, so the stream still ends in what ran before, perhaps a kernel
  // launched early: record it as such (only early grids carry the attribute there next).
  if (err != cudaSuccess) mayCarryEarlyAttribute(stream, true);
  return err;
}

}  // namespace mscclpp_nccl
