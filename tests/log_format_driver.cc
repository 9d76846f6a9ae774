// Drives native/common/logging.cc on the CPU for tests/test_log_format.py: prints the lines named by its
// arguments, in order. "warn": a WARN from main; "fail": a WARN through fail() in ncclDriverCallBody (as
// an API body is named); "info": an INFO line; "banner": what communicator creation calls; "always": a
// WARN printed whatever NCCL_DEBUG says; "lasterror": prints fail()'s text, as ncclGetLastError returns it.
#include <cstdio>
#include <cstring>

#include "native/common/logging.h"

namespace mscclpp_nccl {

Status ncclDriverCallBody() { return fail(Status::kInvalidArgument, "driver call: bad argument %d", 7); }

}  // namespace mscclpp_nccl

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "warn") == 0) mscclpp_nccl::logWarn("driver warning %s", "here");
    if (strcmp(argv[i], "fail") == 0) mscclpp_nccl::ncclDriverCallBody();
    if (strcmp(argv[i], "info") == 0) MSCCLPP_INFO(kInit, "driver info %d", 42);
    if (strcmp(argv[i], "banner") == 0) mscclpp_nccl::logBanner();
    if (strcmp(argv[i], "always") == 0) mscclpp_nccl::logWarnAlways("driver stall");
    if (strcmp(argv[i], "lasterror") == 0) printf("%s\n", mscclpp_nccl::lastError());
  }
  return 0;
}
