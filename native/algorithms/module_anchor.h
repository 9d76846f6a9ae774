// Registers the CUDA module of the compile that includes it (each compile of a .cu file is a module of its
// own, a type shard too: type_shards.cuh), so that kernel_preload.cc can load every kernel of every
// module at once.
#pragma once

#include <vector>

namespace mscclpp_nccl {

// One kernel of each module, in the order the library's static initialisers registered them.
inline std::vector<const void*>& kernelModuleAnchors() {
  static std::vector<const void*> anchors;
  return anchors;
}

struct KernelModuleAnchor {
  explicit KernelModuleAnchor(const void* kernel) { kernelModuleAnchors().push_back(kernel); }
};

}  // namespace mscclpp_nccl

// Registers this compile's module. Use once per .cu file, inside namespace mscclpp_nccl.
#define MSCCLPP_MODULE_ANCHOR()                                                                              \
  namespace {                                                                                                \
  __global__ void moduleAnchorKernel() {}                                                                    \
  const ::mscclpp_nccl::KernelModuleAnchor moduleAnchor(reinterpret_cast<const void*>(&moduleAnchorKernel)); \
  }
