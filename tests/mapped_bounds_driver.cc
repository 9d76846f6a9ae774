// Drives native/algorithms/mapped_bounds.h on the CPU for tests/test_mapped_bounds.py: the checks the
// mapped zero-copy kernels make on their peers' posts. One command per line on stdin:
//   "range INDEX BASE BYTES OFFSET REACH"  a peer's row of the table holding, at INDEX when it is in range,
//                                         an allocation at BASE (0: not mapped) of BYTES; prints the check
//                                         of OFFSET and REACH ("ok BASE" in hex, or the failure);
//   "calls BYTES COLLECTIVE ROOT BYTES COLLECTIVE ROOT"  this rank's call, then a peer's: "ok" or how
//                                         they differ;
//   "sizes NRANKS"                        sizeof(MappedCall) and zeroCopyFlagBytes(NRANKS).
// The row is a heap array of exactly kMaxMappedAllocations entries, so that the sanitizers catch a read
// past it.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "native/algorithms/mapped_bounds.h"

namespace {

using mscclpp_nccl::MappedCheck;

const char* name(MappedCheck check) {
  switch (check) {
    case MappedCheck::kOk:
      return "ok";
    case MappedCheck::kCountsDiffer:
      return "counts";
    case MappedCheck::kCallsDiffer:
      return "calls";
    case MappedCheck::kIndexOutOfRange:
      return "index";
    case MappedCheck::kNotMapped:
      return "unmapped";
    case MappedCheck::kOutOfBounds:
      return "out";
  }
  return "?";
}

}  // namespace

int main() {
  char line[512];
  while (fgets(line, sizeof(line), stdin)) {
    char command[16] = {};
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0;
    const int got = sscanf(line, "%15s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
                           command, &a, &b, &c, &d, &e, &f);
    if (got == 6 && strcmp(command, "range") == 0) {
      std::vector<mscclpp_nccl::MappedRegion> row(mscclpp_nccl::kMaxMappedAllocations);
      if (a < row.size()) row[a] = {reinterpret_cast<char*>(static_cast<uintptr_t>(b)), c};
      char* base = nullptr;
      const MappedCheck check =
          mscclpp_nccl::checkMappedRange(row.data(), static_cast<uint32_t>(a), d, e, &base);
      if (check == MappedCheck::kOk)
        printf("ok %#" PRIxPTR "\n", reinterpret_cast<uintptr_t>(base));
      else
        printf("%s\n", name(check));
    } else if (got == 7 && strcmp(command, "calls") == 0) {
      mscclpp_nccl::MappedCall mine{}, theirs{};
      mine.bytes = a;
      mine.collective = static_cast<uint32_t>(b);
      mine.root = static_cast<int32_t>(c);
      theirs.bytes = d;
      theirs.collective = static_cast<uint32_t>(e);
      theirs.root = static_cast<int32_t>(f);
      printf("%s\n", name(mscclpp_nccl::compareMappedCalls(mine, theirs)));
    } else if (got == 2 && strcmp(command, "sizes") == 0) {
      printf("%zu %zu\n", sizeof(mscclpp_nccl::MappedCall),
             mscclpp_nccl::zeroCopyFlagBytes(static_cast<int>(a)));
    } else {
      fprintf(stderr, "bad command: %s", line);
      return 2;
    }
  }
  return 0;
}
