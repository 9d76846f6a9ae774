// Where a stock libnccl.so.2 may be, in the order the loader (stock_nccl.h) tries the places:
//
// 1. MSCCLPP_NCCL_FALLBACK_LIB, the path of a libnccl.so.2. When set it is the only place searched, so
//    that a mistyped path fails instead of silently picking another NCCL.
// 2. The nvidia-nccl-cu13, then the nvidia-nccl-cu12 Python package of the running interpreter: both
//    wheels install <site-packages>/nvidia/nccl/lib/libnccl.so.2, so the package is told by its
//    nvidia_nccl_cuNN-*.dist-info directory (a lib there without one is tried after both). The
//    site-packages directories are those of MSCCLPP_NCCL_PYTHON_SITE (':'-separated) when set;
//    otherwise they are inferred without running Python, from the process itself:
//      - every loaded object whose path runs through a site-packages or dist-packages directory gives
//        that directory (this library, when installed with pip, or PyTorch's libraries; this also
//        finds a virtual environment's, which /proc/self/exe cannot, as it names the base interpreter);
//      - a loaded lib-dynload directory (CPython's extension modules) gives its sibling site-packages;
//      - when /proc/self/exe is named python*, <prefix>/lib/python3*/site-packages.
//    A process that is no Python interpreter and loads nothing from Python finds none; it can name them
//    with MSCCLPP_NCCL_PYTHON_SITE.
// 3. Each LD_LIBRARY_PATH entry, as it reads now, then the dynamic loader's own search for the bare name
//    (LD_LIBRARY_PATH as it was at start-up, ld.so.cache, the default directories), read from its search
//    path and cache (see loaderSearchPlaces), never by asking the loader to load the name.
// A relative directory, in any of these, is skipped: it names whatever the working directory holds.
#pragma once

#include <string>
#include <vector>

namespace mscclpp_nccl {

struct StockSearch {
  std::string fallbackLib;               // MSCCLPP_NCCL_FALLBACK_LIB; "" when unset
  std::vector<std::string> pythonSites;  // site-packages directories, in search order
  std::string pythonSitesOrigin;         // how they were found, for the report
  bool libraryPathSet = false;           // whether LD_LIBRARY_PATH is set
  std::vector<std::string> libraryPath;  // its non-empty entries
  bool loaderDefault = true;             // finally ask the dynamic loader for the bare name
};

// The search this process asks for: the variables above and the Python directories it can infer.
StockSearch stockSearchFromProcess();

// One place searched: a file to try (`path` non-empty), or only a note why the place offered none.
struct StockPlace {
  std::string where;  // e.g. "MSCCLPP_NCCL_FALLBACK_LIB", "nvidia-nccl-cu13 in /x/site-packages"
  std::string path;
  std::string note;
};

// The places of `search` in order, without the loader's default search (see loaderSearchPlaces): it
// is searched only when every other place failed.
std::vector<StockPlace> stockPlaces(const StockSearch& search);

// The places of the dynamic loader's own search for the bare `name`, found without loading anything:
// each directory of its search path (the executable's run paths, LD_LIBRARY_PATH as it was at
// start-up, the default directories) that holds `name`, then each path /etc/ld.so.cache gives for it
// (the loader reads the cache before the default directories; here it comes last), then a note naming
// where it was not. Relative directories are skipped, as everywhere in the search.
std::vector<StockPlace> loaderSearchPlaces(const std::string& name);

}  // namespace mscclpp_nccl
