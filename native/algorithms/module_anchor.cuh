// Names the CUDA module of the file that includes it (each .cu file is a module of its own), so that
// kernel_preload.cc can load every kernel of the module at once.
#pragma once

// Defines `const void* NAME()`, a kernel of this file's module. Use once per .cu file, inside namespace
// mscclpp_nccl.
#define MSCCLPP_MODULE_ANCHOR(NAME)       \
  namespace {                             \
  __global__ void moduleAnchorKernel() {} \
  }                                       \
  const void* NAME() { return reinterpret_cast<const void*>(&moduleAnchorKernel); }
