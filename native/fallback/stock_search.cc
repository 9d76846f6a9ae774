#include "native/fallback/stock_search.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "native/common/parameters.h"
#include "native/fallback/ld_cache.h"

namespace mscclpp_nccl {
namespace {

constexpr const char* kLibName = "libnccl.so.2";
constexpr const char* kPackageLib = "/nvidia/nccl/lib/libnccl.so.2";
constexpr const char* kPackages[] = {"nvidia-nccl-cu13", "nvidia-nccl-cu12"};

bool isFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool isDirectory(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::vector<std::string> splitList(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string::npos) end = text.size();
    if (end > start) parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::vector<std::string> globPaths(const std::string& pattern) {
  std::vector<std::string> found;
  glob_t matches;
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0)
    found.assign(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  globfree(&matches);
  return found;
}

void addUnique(std::vector<std::string>* list, const std::string& item) {
  if (std::find(list->begin(), list->end(), item) == list->end()) list->push_back(item);
}

bool isRelative(const std::string& dir) { return dir.empty() || dir[0] != '/'; }

constexpr const char* kRelative = "relative directory, skipped";

std::string parentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
}

// The site-packages directories the loaded objects reveal (see stock_search.h).
std::vector<std::string> sitesOfLoadedObjects() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && info->dlpi_name[0] == '/')
          static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &names);
  std::vector<std::string> sites;
  for (const std::string& name : names) {
    for (const char* tree : {"/site-packages/", "/dist-packages/"}) {
      const size_t at = name.find(tree);
      if (at != std::string::npos) addUnique(&sites, name.substr(0, at + strlen(tree) - 1));
    }
    const std::string dir = parentOf(name);
    const std::string dynload = "/lib-dynload";
    if (dir.size() > dynload.size() && dir.compare(dir.size() - dynload.size(), dynload.size(), dynload) == 0)
      addUnique(&sites, parentOf(dir) + "/site-packages");
  }
  return sites;
}

// <prefix>/lib/python3*/site-packages when this process is a python* executable.
std::vector<std::string> sitesOfInterpreter() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return {};
  const std::string path(exe, n);
  if (path.compare(path.rfind('/') + 1, 6, "python") != 0) return {};
  return globPaths(parentOf(parentOf(path)) + "/lib/python3*/site-packages");
}

// The directories of the dynamic loader's search path as the executable sees it (run paths,
// LD_LIBRARY_PATH as at start-up, the default directories), without ld.so.cache.
std::vector<std::string> loaderSearchDirectories() {
  std::vector<std::string> dirs;
  void* program = dlopen(nullptr, RTLD_LAZY);  // the executable, already loaded: nothing runs
  if (program == nullptr) return dirs;
  Dl_serinfo size;
  if (dlinfo(program, RTLD_DI_SERINFOSIZE, &size) == 0 && size.dls_size >= sizeof(Dl_serinfo)) {
    std::vector<std::max_align_t> storage((size.dls_size + sizeof(std::max_align_t) - 1) /
                                          sizeof(std::max_align_t));
    auto* info = reinterpret_cast<Dl_serinfo*>(storage.data());
    info->dls_size = size.dls_size;
    info->dls_cnt = size.dls_cnt;
    if (dlinfo(program, RTLD_DI_SERINFO, info) == 0) {
      const Dl_serpath* paths = info->dls_serpath;
      for (unsigned i = 0; i < info->dls_cnt; ++i)
        if (paths[i].dls_name != nullptr) addUnique(&dirs, paths[i].dls_name);
    }
  }
  dlclose(program);
  return dirs;
}

}  // namespace

StockSearch stockSearchFromProcess() {
  StockSearch search;
  search.fallbackLib = readText(Param::kFallbackLib);
  const std::string sites = readText(Param::kPythonSite);
  if (!sites.empty()) {
    search.pythonSites = splitList(sites, ':');
    search.pythonSitesOrigin = "MSCCLPP_NCCL_PYTHON_SITE";
  } else {
    for (const std::string& site : sitesOfLoadedObjects()) addUnique(&search.pythonSites, site);
    for (const std::string& site : sitesOfInterpreter()) addUnique(&search.pythonSites, site);
    search.pythonSites.erase(std::remove_if(search.pythonSites.begin(), search.pythonSites.end(),
                                            [](const std::string& dir) { return !isDirectory(dir); }),
                             search.pythonSites.end());
    search.pythonSitesOrigin = "the running process (loaded objects, /proc/self/exe)";
  }
  const char* libraryPath = getenv("LD_LIBRARY_PATH");
  search.libraryPathSet = libraryPath != nullptr;
  // ld.so also accepts ';' as a separator.
  if (libraryPath) {
    std::string entries = libraryPath;
    std::replace(entries.begin(), entries.end(), ';', ':');
    search.libraryPath = splitList(entries, ':');
  }
  return search;
}

std::vector<StockPlace> stockPlaces(const StockSearch& search) {
  if (!search.fallbackLib.empty()) return {{"MSCCLPP_NCCL_FALLBACK_LIB", search.fallbackLib, ""}};
  std::vector<StockPlace> places{{"MSCCLPP_NCCL_FALLBACK_LIB", "", "not set"}};

  if (search.pythonSites.empty())
    places.push_back(
        {"Python packages", "", "no site-packages directory found in " + search.pythonSitesOrigin});
  std::vector<bool> hasPackage(search.pythonSites.size(), false);
  for (const char* package : kPackages) {
    std::string distInfo = package;
    std::replace(distInfo.begin(), distInfo.end(), '-', '_');
    for (size_t i = 0; i < search.pythonSites.size(); ++i) {
      const std::string& site = search.pythonSites[i];
      if (isRelative(site) || globPaths(site + "/" + distInfo + "-*.dist-info").empty()) continue;
      hasPackage[i] = true;
      const std::string lib = site + kPackageLib;
      places.push_back({std::string(package) + " in " + site, isFile(lib) ? lib : "",
                        isFile(lib) ? "" : "installed, but " + lib + " is missing"});
    }
  }
  for (size_t i = 0; i < search.pythonSites.size(); ++i) {
    if (hasPackage[i]) continue;
    if (isRelative(search.pythonSites[i])) {
      places.push_back({search.pythonSites[i], "", kRelative});
      continue;
    }
    const std::string lib = search.pythonSites[i] + kPackageLib;
    if (isFile(lib))
      places.push_back({"nvidia/nccl/lib without a package record in " + search.pythonSites[i], lib, ""});
    else
      places.push_back(
          {search.pythonSites[i], "", "neither nvidia-nccl-cu13 nor nvidia-nccl-cu12 installed"});
  }

  std::string without;
  for (const std::string& dir : search.libraryPath) {
    if (isRelative(dir)) {
      places.push_back({"LD_LIBRARY_PATH entry " + dir, "", kRelative});
      continue;
    }
    const std::string lib = dir + "/" + kLibName;
    if (isFile(lib))
      places.push_back({"LD_LIBRARY_PATH entry " + dir, lib, ""});
    else
      without += (without.empty() ? "" : ", ") + dir;
  }
  if (!search.libraryPathSet)
    places.push_back({"LD_LIBRARY_PATH", "", "not set"});
  else if (!without.empty())
    places.push_back({"LD_LIBRARY_PATH", "", std::string("no ") + kLibName + " in " + without});
  return places;
}

std::vector<StockPlace> loaderSearchPlaces(const std::string& name) {
  std::vector<StockPlace> places;
  std::string without;
  for (const std::string& dir : loaderSearchDirectories()) {
    const std::string where = "the loader's search path entry " + dir;
    if (isRelative(dir))
      places.push_back({where, "", kRelative});
    else if (isFile(dir + "/" + name))
      places.push_back({where, dir + "/" + name, ""});
    else
      without += dir + ", ";
  }
  constexpr const char* kCache = "/etc/ld.so.cache";
  std::string why;
  const std::vector<std::string> cached = ldCachePaths(kCache, name, &why);
  for (const std::string& path : cached) places.push_back({kCache, path, ""});
  if (!why.empty())
    places.push_back({kCache, "", why});
  else if (cached.empty())
    without += kCache;
  if (!without.empty()) places.push_back({"the loader's search for " + name, "", "not in " + without});
  return places;
}

}  // namespace mscclpp_nccl
