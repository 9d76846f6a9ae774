// Drives native/transport/allocation_registry.cc on the CPU for tests/test_allocation_registry.py.
// Arguments: CAPACITY; then on stdin one call per line, "ID BASE BYTES [PIN]" (numbers; PIN 1 pins it).
// Prints for each "index I gen G" (or "full") and the events it produced ("export I G ID" /
// "retire I G ID"), then "size N".
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "native/transport/allocation_registry.h"

int main(int argc, char** argv) {
  mscclpp_nccl::AllocationRegistry registry(static_cast<uint16_t>(argc > 1 ? atoi(argv[1]) : 4));
  uint64_t id = 0, base = 0, bytes = 0, call = 0;
  char line[256];
  while (fgets(line, sizeof(line), stdin)) {
    int pin = 0;
    if (sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %d", &id, &base, &bytes, &pin) < 3) break;
    std::vector<mscclpp_nccl::RegistryEvent> events;
    const mscclpp_nccl::AllocationKey key{id, static_cast<uintptr_t>(base), bytes};
    const uint16_t index = registry.use(key, ++call, pin != 0, &events);
    if (index == mscclpp_nccl::AllocationRegistry::kNoIndex) {
      printf("full%s\n", events.empty() ? "" : " with events");
      continue;
    }
    uint16_t foundIndex = 0;
    uint32_t generation = 0;
    if (!registry.find(id, &foundIndex, &generation) || foundIndex != index) return 3;
    if (registry.generationOf(index) != generation) return 4;
    printf("index %u gen %u", index, generation);
    for (const auto& e : events)
      printf(" | %s %u %u %" PRIu64,
             e.kind == mscclpp_nccl::RegistryEvent::Kind::kExport ? "export" : "retire", e.index,
             e.generation, e.key.bufferId);
    printf("\n");
  }
  printf("size %zu\n", registry.size());
  return 0;
}
