#include "native/algorithms/forced_algorithms.h"

#include <climits>
#include <cstdlib>
#include <sstream>

namespace mscclpp_nccl {
namespace {

// "blocks/threads/chunk_bytes", each optional; false on anything but non-negative decimal numbers.
bool parseShape(std::stringstream& fields, TuningChoice* choice) {
  long long numbers[3] = {0, 0, 0};
  std::string number;
  for (int i = 0; i < 3 && std::getline(fields, number, '/'); ++i) {
    char* end = nullptr;
    numbers[i] = strtoll(number.c_str(), &end, 10);
    // Blocks and threads are ints: a larger number would be cut to another shape, not refused.
    if (number.empty() || *end != '\0' || numbers[i] < 0 || (i < 2 && numbers[i] > INT_MAX)) return false;
  }
  choice->blocks = static_cast<int>(numbers[0]);
  choice->threads = static_cast<int>(numbers[1]);
  choice->chunkBytes = static_cast<size_t>(numbers[2]);
  return true;
}

}  // namespace

bool parseForcedAlgorithms(const std::string& text, ForcedAlgorithms* out) {
  ForcedAlgorithms forced = *out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    std::string collectiveText;
    const size_t equals = item.find('=');
    if (equals != std::string::npos) {
      collectiveText = item.substr(0, equals);
      item = item.substr(equals + 1);
    }
    std::stringstream fields(item);
    std::string name;
    std::getline(fields, name, '/');
    const Algorithm* algorithm = findAlgorithm(name);
    TuningChoice choice;
    choice.algorithm = name;
    if (!algorithm || !parseShape(fields, &choice)) return false;
    bool applied = false;
    for (int c = 0; c < kNumCollectives; ++c) {
      const Collective collective = static_cast<Collective>(c);
      const bool named = !collectiveText.empty();
      if (named && collectiveText != collectiveName(collective)) continue;
      if (!algorithm->serves(collective)) {
        if (named) return false;
        continue;
      }
      forced[c] = ForcedAlgorithm{algorithm, choice};
      applied = true;
    }
    if (!applied && !collectiveText.empty()) return false;  // no collective of that name
  }
  *out = forced;
  return true;
}

}  // namespace mscclpp_nccl
