// Drives native/common/parameters.cc on the CPU: prints MSCCLPP_NCCL_WAIT_TIMEOUT as the kernels get it
// (nanoseconds, 0 = wait forever), for tests/test_env.py.
#include <cinttypes>
#include <cstdio>

#include "native/common/parameters.h"

int main() {
  printf("%" PRIu64 "\n", mscclpp_nccl::readNanoseconds(mscclpp_nccl::Param::kWaitTimeout));
  return 0;
}
