// Drives NCCL_DEBUG_FILE (native/common/logging.cc) on the CPU for tests/test_debug_file.py: writes one
// WARN line ("debug file driver"), then, with the argument "exec", replaces itself with `ls -l
// /proc/self/fd` so that the test sees which descriptors a child inherits.
#include <unistd.h>

#include <cstring>

#include "native/common/logging.h"

int main(int argc, char** argv) {
  mscclpp_nccl::logWarn("debug file driver");
  if (argc > 1 && strcmp(argv[1], "exec") == 0) {
    execl("/bin/ls", "ls", "-l", "/proc/self/fd", static_cast<char*>(nullptr));
    return 3;
  }
  return 0;
}
