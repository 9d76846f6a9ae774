// Drives native/transport/allocation_registry.cc on the CPU for tests/test_allocation_registry.py.
// Arguments: CAPACITY; then on stdin one command per line:
//   "ID BASE BYTES [HOW [PIECES]]"  a use (HOW 0: a call, 1: a captured call, 2: a registration) of a
//                          single allocation, or of a run of PIECES equal pieces (ids ID+1...);
//   "u ID"                 ends the registration of ID;  "f ID": forgets ID (its memory was freed).
// Prints for each use "index I gen G" (or "full"), for the others "done", each followed by the events it
// produced ("export I G ID" / "retire I G ID"); then "size N".
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "native/transport/allocation_registry.h"

namespace {

void printEvents(const std::vector<mscclpp_nccl::RegistryEvent>& events) {
  for (const auto& e : events)
    printf(" | %s %u %u %" PRIu64, e.kind == mscclpp_nccl::RegistryEvent::Kind::kExport ? "export" : "retire",
           e.index, e.generation, e.key.bufferId);
  printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  mscclpp_nccl::AllocationRegistry registry(static_cast<uint16_t>(argc > 1 ? atoi(argv[1]) : 4));
  uint64_t id = 0, base = 0, bytes = 0, call = 0;
  char line[256];
  while (fgets(line, sizeof(line), stdin)) {
    std::vector<mscclpp_nccl::RegistryEvent> events;
    char command = 0;
    if (sscanf(line, "%c %" SCNu64, &command, &id) == 2 && (command == 'u' || command == 'f')) {
      if (command == 'u')
        registry.unregister(id, &events);
      else
        registry.forget(id, &events);
      printf("done");
      printEvents(events);
      continue;
    }
    int how = 0, pieces = 0;
    if (sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %d %d", &id, &base, &bytes, &how, &pieces) < 3)
      break;
    mscclpp_nccl::AllocationKey key{id, static_cast<uintptr_t>(base), bytes, 0, {}};
    for (int piece = 0; pieces > 1 && piece < pieces; ++piece)
      key.pieces.push_back({id + 1 + piece, bytes / pieces});
    const uint16_t index = registry.use(key, ++call, static_cast<mscclpp_nccl::RegistryUse>(how), &events);
    if (index == mscclpp_nccl::AllocationRegistry::kNoIndex) {
      printf("full%s\n", events.empty() ? "" : " with events");
      continue;
    }
    uint16_t foundIndex = 0;
    uint32_t generation = 0;
    if (!registry.find(id, &foundIndex, &generation) || foundIndex != index) return 3;
    if (registry.generationOf(index) != generation) return 4;
    printf("index %u gen %u", index, generation);
    printEvents(events);
  }
  printf("size %zu\n", registry.size());
  return 0;
}
