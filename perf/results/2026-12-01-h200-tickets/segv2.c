/* SIGSEGV reporter for the exit-time crash hunt: prints the faulting thread, address, instruction and
   stack pointers, and the mappings that hold them, with async-signal-safe calls only; then a backtrace. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
static void put(const char* s) { ssize_t r = write(2, s, strlen(s)); (void)r; }
static void hex(const char* label, uintptr_t v) {
  char buf[64]; int n = 0; buf[n++] = ' ';
  for (const char* p = label; *p; ++p) buf[n++] = *p;
  buf[n++] = '='; buf[n++] = '0'; buf[n++] = 'x';
  for (int i = 60; i >= 0; i -= 4) buf[n++] = "0123456789abcdef"[(v >> i) & 15];
  buf[n] = 0; put(buf);
}
static void maps_for(uintptr_t a) {
  int fd = open("/proc/self/maps", O_RDONLY); if (fd < 0) return;
  static char buf[1 << 20]; ssize_t total = 0, r;
  while ((r = read(fd, buf + total, sizeof(buf) - 1 - total)) > 0) total += r;
  close(fd); buf[total] = 0;
  for (char* line = buf; line && *line;) {
    char* end = strchr(line, '\n'); if (end) *end = 0;
    uintptr_t lo = 0, hi = 0; const char* p = line;
    while (*p && *p != '-') { lo = lo * 16 + (*p <= '9' ? *p - '0' : *p - 'a' + 10); ++p; }
    if (*p) ++p;
    while (*p && *p != ' ') { hi = hi * 16 + (*p <= '9' ? *p - '0' : *p - 'a' + 10); ++p; }
    if (a >= lo && a < hi) { put("\n  map: "); put(line); }
    line = end ? end + 1 : NULL;
  }
}
static void handler(int sig, siginfo_t* info, void* raw) {
  ucontext_t* uc = (ucontext_t*)raw;
  uintptr_t rip = uc->uc_mcontext.gregs[REG_RIP], rsp = uc->uc_mcontext.gregs[REG_RSP];
  put("\nSEGV2:"); hex("tid", (uintptr_t)syscall(SYS_gettid)); hex("addr", (uintptr_t)info->si_addr);
  hex("rip", rip); hex("rsp", rsp); maps_for(rip); maps_for((uintptr_t)info->si_addr); put("\n");
  void* frames[48]; int n = backtrace(frames, 48); backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL); raise(sig);
}
__attribute__((constructor)) static void init(void) {
  static char stack[1 << 16]; stack_t ss = {0}; ss.ss_sp = stack; ss.ss_size = sizeof(stack); sigaltstack(&ss, NULL);
  struct sigaction sa; memset(&sa, 0, sizeof(sa)); sa.sa_sigaction = handler; sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, NULL); sigaction(SIGBUS, &sa, NULL);
}
