#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
static void handler(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  int fd = open("/proc/self/maps", O_RDONLY);
  char buf[4096]; ssize_t r;
  while ((r = read(fd, buf, sizeof buf)) > 0) {
    /* print only lines of libnccl */
    char* p = buf; buf[r < (ssize_t)sizeof buf ? r : (ssize_t)sizeof buf - 1] = 0;
    char* line = strtok(p, "\n");
    while (line) { if (strstr(line, "libnccl")) { write(2, line, strlen(line)); write(2, "\n", 1); } line = strtok(NULL, "\n"); }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void init(void) { signal(SIGSEGV, handler); }
