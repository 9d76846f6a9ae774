#include "tests/thread_refusal.h"

#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>

std::atomic<int> threadsAllowed{-1};

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) {
  for (int left = threadsAllowed.load(); left >= 0;) {
    if (left == 0) return EAGAIN;
    if (threadsAllowed.compare_exchange_weak(left, left - 1)) break;
  }
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Create real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  return real(thread, attr, start, arg);
}
