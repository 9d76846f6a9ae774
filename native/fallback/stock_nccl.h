// A private stock NCCL: loads NVIDIA's libnccl.so.2 (2.27 or newer) beside this library, which exports
// the same names, and gives its functions as a typed table. It is for communicators our transport
// cannot serve (several hosts, DESIGN.md here): loaded when the first routed communicator is created
// (native/routed_communicator.cc), never for a communicator of one host.
//
// Where it looks, and the variables it reads (MSCCLPP_NCCL_FALLBACK_LIB, MSCCLPP_NCCL_PYTHON_SITE):
// stock_search.h. The first candidate that passes every check below wins; when none does, the error
// names every place searched and why each candidate was refused.
//
// Checked before loading, because dlopen runs a library's constructors before it returns; a candidate
// that fails any check never has its code run, and NCCL_DEBUG=INFO names it and why it was refused:
//  - where it is (path_trust.h): an absolute path; a file owned by root or this user and not writable
//    by everyone; its directory not world-writable, nor any directory above it unless sticky.
//  - what it is (elf_probe.h, read from the file): 64-bit little-endian ELF of this machine, a shared
//    library whose SONAME is libnccl.so.2 and whose .dynsym defines every required function below;
//    when its .rodata carries stock's "NCCL version X.Y.Z" banner, that version is 2.27 or newer.
// The candidate that passes is loaded once, by its resolved path; after loading, its ncclGetVersion
// must answer 2.27 or newer (the only check for a library without the banner).
//
// How it loads: dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND), in the default link-map namespace.
//  - Stock's symbols never resolve to ours: stock calls its own exported functions through its PLT
//    (NCCL 2.32.3 has JUMP_SLOT relocations for ncclBroadcast, ncclGetUniqueId, ncclGetErrorString,
//    ncclCommGetAsyncError, ...). With RTLD_LOCAL alone they would bind to the first definition in the
//    global scope, which is ours wherever ours is the preloaded or linked libnccl.so.2. RTLD_DEEPBIND
//    searches the library's own dependency tree first, so they bind to stock.
//  - Ours never resolve to stock: RTLD_LOCAL keeps stock out of the global scope, so neither this
//    library nor the application nor PyTorch can bind to it.
//  - Why not dlmopen(LM_ID_NEWLM), a namespace of its own: stock NCCL does not link the CUDA driver; its
//    statically linked CUDA runtime dlopen()s "libcuda.so.1" and takes every driver function through
//    cudaGetDriverEntryPoint. Inside a new namespace that dlopen loads a second libcuda, initialised
//    on its own, whose contexts, streams and memory are not the application's: the cudaStream_t and
//    device buffers we pass would be foreign to it, and graph capture across the two impossible. glibc
//    cannot share one object between namespaces. A new namespace also loads its own libc and libstdc++,
//    and glibc reserves static TLS for a few namespaces only (tunable rtld.nns, default 4). In the
//    default namespace stock's dlopen("libcuda.so.1") returns the driver the process already has.
//
// What RTLD_DEEPBIND costs:
//  - Stock's calls into its own dependencies (libc, libstdc++) bind there, past anything preloaded into
//    the global scope: a malloc replacement or a tracing preload does not see them.
//  - AddressSanitizer, ThreadSanitizer and MemorySanitizer abort the process on an RTLD_DEEPBIND
//    dlopen; where their runtime is present the loader returns an error instead.
//  - Stock shares the process's libc, so its environment is the user's: what the private copy needs
//    must go through ncclConfig_t or be set with care, not left in the user's environment.
//  - A stock file some other code already loaded without RTLD_DEEPBIND is reused as it was bound.
//
// Never ourselves: a candidate is refused when it is the file this library was loaded from (device
// and inode, so symbolic and hard links count), a copy of it (same GNU build id), both before loading,
// or, once loaded, when its ncclGetVersion lies in this library's object. Our library exports exactly
// stock's names (tests/test_exports.py), so no marker symbol could tell it apart.
//
// The types come from include/nccl.h, which tests/test_abi.py checks against stock's nccl.h: this table is
// stock NCCL's ABI, the one place in native/ where NCCL types appear.
#pragma once

#include <string>

#include "native/common/status.h"
#include "native/fallback/stock_search.h"
#include "nccl.h"

namespace mscclpp_nccl {

// NCCL_VERSION(2, 27, 0): the oldest stock accepted.
constexpr int kMinStockVersionCode = 22700;

// Functions every accepted stock NCCL has; a candidate without one is refused.
#define MSCCLPP_STOCK_NCCL_REQUIRED(X) \
  X(ncclGetVersion)                    \
  X(ncclGetUniqueId)                   \
  X(ncclCommInitRankConfig)            \
  X(ncclCommInitRank)                  \
  X(ncclCommFinalize)                  \
  X(ncclCommDestroy)                   \
  X(ncclCommAbort)                     \
  X(ncclCommSplit)                     \
  X(ncclCommGetAsyncError)             \
  X(ncclGetErrorString)                \
  X(ncclGetLastError)                  \
  X(ncclAllReduce)                     \
  X(ncclAllGather)                     \
  X(ncclReduceScatter)                 \
  X(ncclBroadcast)                     \
  X(ncclReduce)                        \
  X(ncclSend)                          \
  X(ncclRecv)                          \
  X(ncclGroupStart)                    \
  X(ncclGroupEnd)

// Functions of later releases: nullptr where the stock library predates them.
#define MSCCLPP_STOCK_NCCL_OPTIONAL(X) \
  X(ncclCommShrink)                    \
  X(ncclAlltoAll)                      \
  X(ncclGather)                        \
  X(ncclScatter)                       \
  X(ncclRedOpCreatePreMulSum)          \
  X(ncclRedOpDestroy)

// Stock's functions, each with the type of its declaration in include/nccl.h: `api.ncclAllReduce(...)`.
struct StockNcclApi {
#define MSCCLPP_STOCK_MEMBER(name) decltype(&::name) name = nullptr;
  MSCCLPP_STOCK_NCCL_REQUIRED(MSCCLPP_STOCK_MEMBER)
  MSCCLPP_STOCK_NCCL_OPTIONAL(MSCCLPP_STOCK_MEMBER)
#undef MSCCLPP_STOCK_MEMBER
};

struct StockNccl {
  void* handle = nullptr;  // never closed: stock may have threads running until the process ends
  std::string path;
  std::string where;  // the place it was found, as the search names it
  int versionCode = 0;
  StockNcclApi api;
};

// Searches the places of `search` in order and loads the first acceptable stock NCCL into `out`.
// `self` is an address inside the library that must never be picked (nullptr: the library holding
// this code). Fails with kSystemError and a message naming every place searched.
Status loadStockNccl(const StockSearch& search, const void* self, StockNccl* out);

// The process's private stock NCCL, searched for once with stockSearchFromProcess() (thread-safe);
// later calls return the same library, or fail again with the same message.
Status stockNccl(const StockNccl** out);

}  // namespace mscclpp_nccl
