#include "native/fallback/stock_nccl.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "native/common/logging.h"
#include "native/fallback/elf_probe.h"
#include "native/fallback/library_identity.h"
#include "native/fallback/path_trust.h"

namespace mscclpp_nccl {
namespace {

std::string versionText(int code) {
  // NCCL_VERSION's two encodings: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
  const bool old = code < 20900;
  char text[48];
  snprintf(text, sizeof(text), "%d.%d.%d (code %d)", old ? code / 1000 : code / 10000,
           old ? code / 100 % 10 : code / 100 % 100, code % 100, code);
  return text;
}

constexpr const char* kSoname = "libnccl.so.2";
// Stock's .rodata is under 1 MiB (2.32.3); its device code lies in other sections.
constexpr size_t kMaxRodataBytes = 16u << 20;

// The version code of the first "NCCL version X.Y.Z" in `text` (stock's banner), or 0.
int versionCodeInText(const std::vector<unsigned char>& text) {
  static const char kBanner[] = "NCCL version ";
  const size_t banner = sizeof(kBanner) - 1;
  const char* data = reinterpret_cast<const char*>(text.data());
  for (size_t at = 0; at + banner <= text.size(); ++at) {
    const void* hit = memmem(data + at, text.size() - at, kBanner, banner);
    if (hit == nullptr) return 0;
    at = static_cast<const char*>(hit) - data;
    size_t next = at + banner;
    int part[3] = {0, 0, 0};
    int parts = 0;
    for (; parts < 3; ++parts) {
      size_t digits = 0;
      while (next < text.size() && digits < 3 && data[next] >= '0' && data[next] <= '9') {
        part[parts] = part[parts] * 10 + (data[next++] - '0');
        ++digits;
      }
      if (digits == 0) break;
      if (parts < 2 && (next >= text.size() || data[next++] != '.')) break;
    }
    if (parts < 3) continue;
    // NCCL_VERSION's two encodings (see versionText).
    const bool old = part[0] < 2 || (part[0] == 2 && part[1] < 9);
    return old ? part[0] * 1000 + part[1] * 100 + part[2] : part[0] * 10000 + part[1] * 100 + part[2];
  }
  return 0;
}

// What the file itself says, read without loading it: "" when it may be loaded, else why not.
std::string staticRefusal(const std::string& path) {
  ElfLibrary elf;
  std::string why = readElfLibrary(path, true, kMaxRodataBytes, &elf);
  if (!why.empty()) return why;
  if (elf.soname != kSoname)
    return elf.soname.empty() ? std::string("has no SONAME (not ") + kSoname + ")"
                              : "has the SONAME " + elf.soname + ", not " + kSoname;
  static const char* const kRequired[] = {
#define MSCCLPP_STOCK_NAME(name) #name,
      MSCCLPP_STOCK_NCCL_REQUIRED(MSCCLPP_STOCK_NAME)
#undef MSCCLPP_STOCK_NAME
  };
  for (const char* name : kRequired)
    if (!elf.defines(name)) return std::string("has no ") + name + " (not NCCL, or too old)";
  const int code = versionCodeInText(elf.rodata);
  if (code != 0 && code < kMinStockVersionCode)
    return "version " + versionText(code) + " is older than " + versionText(kMinStockVersionCode) +
           " (read from the file)";
  return "";
}

// The sanitizer whose runtime is in this process and aborts on RTLD_DEEPBIND, or nullptr.
const char* deepbindRefusingSanitizer() {
  static const struct {
    const char* symbol;
    const char* name;
  } kRuntimes[] = {{"__asan_init", "AddressSanitizer"},
                   {"__tsan_init", "ThreadSanitizer"},
                   {"__msan_init", "MemorySanitizer"}};
  for (const auto& runtime : kRuntimes)
    if (dlsym(RTLD_DEFAULT, runtime.symbol) != nullptr) return runtime.name;
  return nullptr;
}

// The library the loader must never pick.
struct Self {
  LoadedObject object;
  FileIdentity file;
  std::string buildId;
};

Self selfAt(const void* address) {
  Self self;
  self.object = loadedObjectAt(address);
  std::string ignored;
  if (!self.object.path.empty()) {
    self.file = fileIdentity(self.object.path, &ignored);
    self.buildId = elfBuildId(self.object.path);
  }
  return self;
}

// Resolves the table in `handle`; "" or the first required function it lacks.
std::string resolveApi(void* handle, StockNcclApi* api) {
  std::string missing;
#define MSCCLPP_STOCK_REQUIRE(name)                                        \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(handle, #name)); \
  if (api->name == nullptr && missing.empty()) missing = #name;
#define MSCCLPP_STOCK_OFFER(name) api->name = reinterpret_cast<decltype(api->name)>(dlsym(handle, #name));
  MSCCLPP_STOCK_NCCL_REQUIRED(MSCCLPP_STOCK_REQUIRE)
  MSCCLPP_STOCK_NCCL_OPTIONAL(MSCCLPP_STOCK_OFFER)
#undef MSCCLPP_STOCK_REQUIRE
#undef MSCCLPP_STOCK_OFFER
  return missing;
}

class Attempt {
 public:
  explicit Attempt(const Self& self) : self_(self) {}

  // Loads `path` into `out` if acceptable; otherwise returns why not. Everything that can be judged
  // without running the file's code is judged first: loading runs its constructors.
  std::string tryLoad(const StockPlace& place, StockNccl* out) {
    if (place.path[0] != '/') return "is not an absolute path";
    std::string why;
    const FileIdentity file = fileIdentity(place.path, &why);
    if (!file.valid) return why;
    if (file.sameFile(self_.file)) return "is this library (" + self_.object.path + ")";
    for (const auto& earlier : tried_)
      if (file.sameFile(earlier.first)) return "same file as " + earlier.second + ", refused above";
    tried_.emplace_back(file, place.where);
    // Refused before loading: a copy of ours would run its initialisers.
    if (!self_.buildId.empty() && elfBuildId(place.path) == self_.buildId)
      return "a copy of this library (" + self_.object.path + ", same build id)";
    std::string resolved;
    why = untrustedReason(place.path, &resolved);
    if (why.empty()) why = staticRefusal(resolved);
    if (!why.empty()) return why;

    // The only load of the candidate, by the path just judged.
    void* handle = dlopen(resolved.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* error = dlerror();
      return std::string("cannot be loaded: ") + (error ? error : "unknown error");
    }
    StockNccl found;
    found.handle = handle;
    found.path = resolved;
    found.where = place.where;
    const std::string missing = resolveApi(handle, &found.api);
    if (!missing.empty()) {
      why = "has no " + missing + " (not NCCL, or too old)";
    } else if (self_.object.base != nullptr &&
               loadedObjectAt(reinterpret_cast<const void*>(found.api.ncclGetVersion)).base ==
                   self_.object.base) {
      why = "loads as this library (" + self_.object.path + ")";
    } else if (found.api.ncclGetVersion(&found.versionCode) != ncclSuccess) {
      why = "its ncclGetVersion failed";
    } else if (found.versionCode < kMinStockVersionCode) {
      why =
          "version " + versionText(found.versionCode) + " is older than " + versionText(kMinStockVersionCode);
    }
    if (!why.empty()) {
      dlclose(handle);
      return why;
    }
    *out = found;
    return "";
  }

 private:
  const Self& self_;
  std::vector<std::pair<FileIdentity, std::string>> tried_;
};

}  // namespace

Status loadStockNccl(const StockSearch& search, const void* self, StockNccl* out) {
  constexpr const char* kWhat = "no usable stock NCCL (2.27 or newer)";
  if (const char* sanitizer = deepbindRefusingSanitizer())
    return fail(Status::kSystemError,
                "%s: not loaded under %s, which aborts on the RTLD_DEEPBIND load that keeps stock NCCL's "
                "symbols apart from ours",
                kWhat, sanitizer);
  const Self me = selfAt(self ? self : reinterpret_cast<const void*>(&loadStockNccl));
  Attempt attempt(me);
  std::string report;
  auto note = [&](const std::string& where, const std::string& text) {
    report += (report.empty() ? "" : "; ") + where + ": " + text;
  };
  // Tries one place; true when it gave the library.
  auto consider = [&](const StockPlace& place) {
    if (place.path.empty()) {
      MSCCLPP_INFO(kInit, "stock NCCL search, %s: %s", place.where.c_str(), place.note.c_str());
      note(place.where, place.note);
      return false;
    }
    const std::string why = attempt.tryLoad(place, out);
    if (why.empty()) {
      MSCCLPP_INFO(kInit, "stock NCCL %s loaded from %s (%s)", versionText(out->versionCode).c_str(),
                   out->path.c_str(), out->where.c_str());
      return true;
    }
    MSCCLPP_INFO(kInit, "stock NCCL candidate %s (%s) refused: %s", place.path.c_str(), place.where.c_str(),
                 why.c_str());
    note(place.where, place.path + " " + why);
    return false;
  };
  for (const StockPlace& place : stockPlaces(search))
    if (consider(place)) return Status::kSuccess;
  if (search.fallbackLib.empty() && search.loaderDefault)
    for (const StockPlace& place : loaderSearchPlaces(kSoname))
      if (consider(place)) return Status::kSuccess;
  return fail(Status::kSystemError, "%s; searched: %s", kWhat, report.c_str());
}

Status stockNccl(const StockNccl** out) {
  static StockNccl loaded;
  static Status status = Status::kSuccess;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    status = loadStockNccl(stockSearchFromProcess(), nullptr, &loaded);
    if (!ok(status)) error = lastError();
  });
  if (!ok(status)) return fail(status, "%s", error.c_str());
  *out = &loaded;
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
