// Calls NCCL entry points while the process cannot allocate (operator new throws std::bad_alloc) or
// cannot start threads (pthread_create fails with EAGAIN, as under `ulimit -u`), and prints what each
// returned: an exception must come back as an error code, never std::terminate.
// Usage: failing_alloc_driver LIB new|thread
#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {
bool failNew = false;
bool failThreads = false;
}  // namespace

// The executable's definitions interpose the library's (it takes them from libstdc++ and libc).
void* operator new(size_t size) {
  if (failNew) throw std::bad_alloc();
  if (void* p = malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static Create real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  if (failThreads) return EAGAIN;
  return real(thread, attr, start, arg);
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  // The replacements above reach the library only if the executable exports them: a compiler that links
  // libstdc++ statically exports nothing unless told (-rdynamic), and the test would then prove nothing.
  void* (*ourNew)(size_t) = &operator new;
  if (dlsym(RTLD_DEFAULT, "_Znwm") != reinterpret_cast<void*>(ourNew) ||
      dlsym(RTLD_DEFAULT, "pthread_create") != reinterpret_cast<void*>(&pthread_create)) {
    fprintf(stderr, "operator new or pthread_create is not exported: link with -rdynamic\n");
    return 3;
  }
  using LastError = const char* (*)(void*);
  auto lastError = reinterpret_cast<LastError>(dlsym(lib, "ncclGetLastError"));
  bool& failing = strcmp(argv[2], "thread") == 0 ? failThreads : failNew;
  auto call = [&](const char* name, auto... args) {
    auto fn = reinterpret_cast<int (*)(decltype(args)...)>(dlsym(lib, name));
    failing = true;
    const int rc = fn(args...);
    failing = false;
    printf("%s %d %s\n", name, rc, lastError(nullptr));
    fflush(stdout);
  };
  // The first failure of the process reads the logging settings (NCCL_DEBUG, NCCL_DEBUG_FILE).
  call("ncclCommCount", static_cast<void*>(nullptr), static_cast<int*>(nullptr));
  char id[128] = {};
  call("ncclGetUniqueId", static_cast<void*>(id));
  void* ptr = nullptr;
  call("ncclMemAlloc", &ptr, static_cast<size_t>(1) << 20);
  call("ncclCommInitAll", static_cast<void**>(&ptr), 1, static_cast<const int*>(nullptr));
  // A group's initialisations run on threads of ncclGroupEnd (with a GPU; without one InitRank fails).
  struct UniqueId {
    char bytes[128];
  } unique = {};
  reinterpret_cast<int (*)(UniqueId*)>(dlsym(lib, "ncclGetUniqueId"))(&unique);
  void* comm = nullptr;
  call("ncclGroupStart");
  call("ncclCommInitRank", &comm, 1, unique, 0);
  call("ncclGroupEnd");
  return 0;
}
