// MSCCLPP_NCCL_ALGO: algorithms (and optionally their grid) forced per collective, for experiments and
// for the tuner, which times each candidate this way.
//   items:  [collective=]algorithm[/blocks[/threads[/chunk_bytes]]], comma-separated
// An item without a collective applies to every collective the algorithm serves.
#pragma once

#include <array>
#include <string>

#include "native/algorithms/registry.h"
#include "native/algorithms/tuning_table.h"

namespace mscclpp_nccl {

struct ForcedAlgorithm {
  const Algorithm* algorithm = nullptr;  // null: not forced
  TuningChoice choice;
};

using ForcedAlgorithms = std::array<ForcedAlgorithm, kNumCollectives>;

// Parses `text` into `out` (indexed by Collective). A malformed item, an unknown algorithm or one named
// for a collective it does not serve refuses the whole text: false, and `out` is left as it was.
bool parseForcedAlgorithms(const std::string& text, ForcedAlgorithms* out);

}  // namespace mscclpp_nccl
