#include "native/algorithms/kernel_preload.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <vector>

#include "native/algorithms/module_anchor.h"
#include "native/common/logging.h"

namespace mscclpp_nccl {

namespace {

struct ModuleLoader {
  PFN_cuFuncGetModule_v11000 funcGetModule = nullptr;
  PFN_cuModuleGetFunctionCount_v12040 functionCount = nullptr;
  PFN_cuModuleEnumerateFunctions_v12040 enumerate = nullptr;
  PFN_cuFuncLoad_v12040 load = nullptr;

  bool resolve() {
    return entry("cuFuncGetModule", 11000, reinterpret_cast<void**>(&funcGetModule)) &&
           entry("cuModuleGetFunctionCount", 12040, reinterpret_cast<void**>(&functionCount)) &&
           entry("cuModuleEnumerateFunctions", 12040, reinterpret_cast<void**>(&enumerate)) &&
           entry("cuFuncLoad", 12040, reinterpret_cast<void**>(&load));
  }

  static bool entry(const char* name, unsigned version, void** fn) {
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, fn, version, cudaEnableDefault, &query) == cudaSuccess &&
        query == cudaDriverEntryPointSuccess && *fn != nullptr)
      return true;
    cudaGetLastError();
    return false;
  }

  // Loads every function of the module that holds `kernel`; returns how many, or -1.
  int loadModuleOf(const void* kernel) const {
    cudaFunction_t function = nullptr;
    CUmodule module = nullptr;
    unsigned count = 0;
    if (cudaGetFuncBySymbol(&function, kernel) != cudaSuccess ||
        funcGetModule(&module, reinterpret_cast<CUfunction>(function)) != CUDA_SUCCESS ||
        functionCount(&count, module) != CUDA_SUCCESS) {
      cudaGetLastError();
      return -1;
    }
    std::vector<CUfunction> functions(count);
    if (count > 0 && enumerate(functions.data(), count, module) != CUDA_SUCCESS) return -1;
    for (CUfunction f : functions)
      if (load(f) != CUDA_SUCCESS) return -1;
    return static_cast<int>(count);
  }
};

}  // namespace

void preloadKernels(int device) {
  static std::mutex mutex;
  static std::set<int> done;
  std::lock_guard<std::mutex> lock(mutex);
  if (!done.insert(device).second) return;
  ModuleLoader loader;
  if (!loader.resolve()) {
    MSCCLPP_INFO(kInit, "kernels stay lazily loaded: the driver cannot enumerate or load functions");
    return;
  }
  int loaded = 0;
  for (const void* anchor : kernelModuleAnchors()) {
    const int count = loader.loadModuleOf(anchor);
    if (count < 0) {
      MSCCLPP_INFO(kInit, "GPU %d: a module of kernels could not be preloaded; it loads at first launch",
                   device);
      continue;
    }
    loaded += count;
  }
  MSCCLPP_INFO(kInit, "GPU %d: %d kernels of %zu modules preloaded", device, loaded,
               kernelModuleAnchors().size());
}

}  // namespace mscclpp_nccl
