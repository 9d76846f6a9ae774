// Drives shim/group.cc on the CPU (with tests/stubs/shim/enqueue.h in place of the communicator):
// `group_error_text_driver CASE` queues work for ncclGroupEnd that fails on the thread it runs on, and
// prints "result R error <TEXT>": what ncclGroupEnd returned and the calling thread's last error text.
// Cases: "fail" (one item fails), "mixed" (a success, an in-progress and a failure, each its own
// thread), "throw" (the item throws), "none" (nothing fails).
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "native/common/logging.h"
#include "shim/api.h"
#include "shim/group.h"

// The NVTX ranges of the entry points: nothing to record here.
ApiRange::ApiRange(const char*) {}
ApiRange::~ApiRange() {}

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

namespace {

int keys[3];  // distinct order keys: each item runs on a thread of its own

ncclResult_t failing() { return toNccl(fail(Status::kInvalidUsage, "queued work failed on its own thread")); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const char* which = argv[1];
  ncclGroupStart();
  if (strcmp(which, "fail") == 0) {
    deferToGroupEnd(failing);
  } else if (strcmp(which, "mixed") == 0) {
    deferToGroupEnd([] { return ncclSuccess; }, &keys[0]);
    deferToGroupEnd([] { return ncclInProgress; }, &keys[1]);
    deferToGroupEnd(failing, &keys[2]);
  } else if (strcmp(which, "throw") == 0) {
    deferToGroupEnd([]() -> ncclResult_t { throw std::runtime_error("thrown by queued work"); });
  } else if (strcmp(which, "none") != 0) {
    return 2;
  }
  mscclpp_nccl::setLastError("stale text of an earlier call");
  const ncclResult_t result = ncclGroupEnd();
  printf("result %d error <%s>\n", static_cast<int>(result), mscclpp_nccl::lastError());
  return 0;
}
