// The dynamic loader's cache (/etc/ld.so.cache, written by ldconfig), read as a file: which paths it
// gives for a library name. The loader's search reads it between LD_LIBRARY_PATH and the default
// directories; reading it here lets the stock NCCL search reach the same files without asking the
// loader to load anything.
//
// Only the format glibc writes since 2.32 ("glibc-ld.so.cache1.1" at the start) is read; every count
// and string offset is checked against the file's size, and the file is capped in size.
#pragma once

#include <string>
#include <vector>

namespace mscclpp_nccl {

// The paths the cache at `cacheFile` gives for `name`, in its order; empty with `why` when it
// cannot be read (an empty list with an empty `why`: the cache has no such name).
std::vector<std::string> ldCachePaths(const std::string& cacheFile, const std::string& name,
                                      std::string* why);

}  // namespace mscclpp_nccl
