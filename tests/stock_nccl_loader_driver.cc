// Drives native/fallback/stock_nccl.cc on the CPU, against stub libraries that tests/
// test_stock_nccl_loader.py builds. Modes:
//   find   search as the process asks (stockSearchFromProcess) and print what was loaded, or
//          "error <text>" and exit 1; the library to never pick is the preloaded stand-in for ours
//          (the object defining stubOursMarker) when there is one
//   find-later  as find, after unsetting LD_LIBRARY_PATH (a process that changed it after start-up)
//   calls  as find, then call every function of the table, then the global ncclAllReduce, and say
//          whether the stock stub's own symbols became global
//   once   stockNccl() twice: the same library, or the same error, each time
//   plain PATH      negative control: dlopen(RTLD_LOCAL) without RTLD_DEEPBIND, then ncclAllReduce
//   namespace PATH  negative control: dlmopen(LM_ID_NEWLM), then ncclCommInitRank (which loads libcuda)
//   elf PATH...     read each file as the loader does before loading, one line each: "elf ok SONAME
//                   COUNT" (COUNT defined dynamic symbols) or "elf refused WHY"; loads nothing
//   cache FILE NAME the paths the ld.so.cache FILE gives for NAME, one "cache PATH" line each, or
//                   "cache refused WHY"
// Before loading anything, the driver loads libcuda.so.1 when one is on the path, as our own CUDA
// runtime would have, and prints its cuInit so that the test can tell which copy stock sees.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "native/common/logging.h"
#include "native/fallback/elf_probe.h"
#include "native/fallback/ld_cache.h"
#include "native/fallback/stock_nccl.h"

using mscclpp_nccl::StockNccl;

namespace {

void callTable(const mscclpp_nccl::StockNcclApi& api) {
  int version = 0;
  ncclUniqueId id;
  ncclComm_t comm = nullptr, split = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclResult_t error = ncclSuccess;
  api.ncclGetVersion(&version);
  api.ncclGetUniqueId(&id);
  api.ncclCommInitRank(&comm, 1, id, 0);
  api.ncclCommInitRankConfig(&comm, 1, id, 0, &config);
  api.ncclCommSplit(comm, 0, 0, &split, &config);
  api.ncclGroupStart();
  api.ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr);
  api.ncclAllGather(nullptr, nullptr, 0, ncclFloat32, comm, nullptr);
  api.ncclReduceScatter(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr);
  api.ncclBroadcast(nullptr, nullptr, 0, ncclFloat32, 0, comm, nullptr);
  api.ncclReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, 0, comm, nullptr);
  api.ncclSend(nullptr, 0, ncclFloat32, 0, comm, nullptr);
  api.ncclRecv(nullptr, 0, ncclFloat32, 0, comm, nullptr);
  api.ncclGroupEnd();
  api.ncclCommGetAsyncError(comm, &error);
  api.ncclGetLastError(comm);
  api.ncclCommFinalize(comm);
  api.ncclCommAbort(split);
  api.ncclCommDestroy(comm);
}

int find(bool calls) {
  const void* self = dlsym(RTLD_DEFAULT, "stubOursMarker");
  StockNccl stock;
  if (!mscclpp_nccl::ok(mscclpp_nccl::loadStockNccl(mscclpp_nccl::stockSearchFromProcess(), self, &stock))) {
    printf("error %s\n", mscclpp_nccl::lastError());
    return 1;
  }
  printf("loaded %s\nwhere %s\nversion %d\n", stock.path.c_str(), stock.where.c_str(), stock.versionCode);
  printf("error_string %s\n", stock.api.ncclGetErrorString(ncclInvalidUsage));
  if (!calls) return 0;
  callTable(stock.api);
  auto global = reinterpret_cast<decltype(&ncclAllReduce)>(dlsym(RTLD_DEFAULT, "ncclAllReduce"));
  if (global) global(nullptr, nullptr, 0, ncclFloat32, ncclSum, nullptr, nullptr);
  printf("stock symbols global %s\n", dlsym(RTLD_DEFAULT, "stubStockMarker") ? "yes" : "no");
  return 0;
}

int once() {
  const StockNccl* first = nullptr;
  const StockNccl* second = nullptr;
  const bool loaded = mscclpp_nccl::ok(mscclpp_nccl::stockNccl(&first));
  const std::string error = mscclpp_nccl::lastError();
  mscclpp_nccl::setLastError("");
  const bool again = mscclpp_nccl::ok(mscclpp_nccl::stockNccl(&second));
  if (loaded && again) printf("loaded %s, same %s\n", first->path.c_str(), first == second ? "yes" : "no");
  if (!loaded && !again)
    printf("error twice, same %s: %s\n", error == mscclpp_nccl::lastError() ? "yes" : "no", error.c_str());
  return loaded == again ? 0 : 1;
}

// The negative controls load the way the loader must not, to show what it prevents.
int control(const char* mode, const char* path) {
  const bool namespaced = strcmp(mode, "namespace") == 0;
  void* handle =
      namespaced ? dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL) : dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    printf("error %s\n", dlerror());
    return 1;
  }
  if (namespaced) {
    auto init = reinterpret_cast<decltype(&ncclCommInitRank)>(dlsym(handle, "ncclCommInitRank"));
    ncclComm_t comm = nullptr;
    init(&comm, 1, ncclUniqueId{}, 0);
  } else {
    auto allReduce = reinterpret_cast<decltype(&ncclAllReduce)>(dlsym(handle, "ncclAllReduce"));
    allReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, nullptr, nullptr);
  }
  return 0;
}

int elf(int count, char** paths) {
  for (int i = 0; i < count; ++i) {
    mscclpp_nccl::ElfLibrary library;
    const std::string why = mscclpp_nccl::readElfLibrary(paths[i], true, 1u << 20, &library);
    if (why.empty())
      printf("elf ok %s %zu\n", library.soname.c_str(), library.defined.size());
    else
      printf("elf refused %s\n", why.c_str());
  }
  return 0;
}

int cache(const char* file, const char* name) {
  std::string why;
  for (const std::string& path : mscclpp_nccl::ldCachePaths(file, name, &why))
    printf("cache %s\n", path.c_str());
  if (!why.empty()) printf("cache refused %s\n", why.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL))
    printf("driver libcuda %p\n", dlsym(cuda, "cuInit"));
  fflush(stdout);
  if (mode == "find-later") unsetenv("LD_LIBRARY_PATH");
  if (mode == "find" || mode == "find-later" || mode == "calls") return find(mode == "calls");
  if (mode == "once") return once();
  if ((mode == "plain" || mode == "namespace") && argc == 3) return control(argv[1], argv[2]);
  if (mode == "elf") return elf(argc - 2, argv + 2);
  if (mode == "cache" && argc == 4) return cache(argv[2], argv[3]);
  fprintf(stderr, "usage: %s find|calls|once|plain PATH|namespace PATH|elf PATH...|cache FILE NAME\n",
          argv[0]);
  return 2;
}
