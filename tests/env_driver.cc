// Drives native/common/env.cc on the CPU: prints MSCCLPP_NCCL_WAIT_TIMEOUT as the kernels get it
// (nanoseconds, 0 = wait forever), for tests/test_env.py.
#include <cinttypes>
#include <cstdio>

#include "native/common/env.h"

int main() {
  printf("%" PRIu64 "\n", mscclpp_nccl::envSecondsAsNs("MSCCLPP_NCCL_WAIT_TIMEOUT", 0.0));
  return 0;
}
