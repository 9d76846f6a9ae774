// Test driver for the tuning table and the JSON parser (tests/test_tuning_table.py builds it with g++).
//
//   tuning_driver TABLE [ALGORITHM...]
//     Loads TABLE, knowing ALGORITHM... (default: the four packet algorithms), then answers lookups read
//     from stdin, one per line: "[sm_NN] GPU NAME nranks ranksPerGpu collective dtypeBytes bytes" (the GPU
//     name may contain spaces; sm_NN, its architecture, may be left out) with "algorithm blocks threads
//     chunkBytes" or "none". Every lookup also goes through filtered() and the per-call form, and prints
//     "MISMATCH" if they disagree.
//   tuning_driver --parse TABLE [ALGORITHM...]
//     The same, but reads TABLE itself and goes through TuningTable::parse.
//   tuning_driver --bytes TABLE [ALGORITHM...]
//     Loads TABLE and prints "bytes N fnv H": the size and FNV-1a hash of the bytes load() parsed
//     (and returned for the selector's fingerprint).
//   tuning_driver --json FILE
//     Parses FILE and prints it back as compact JSON (floats always with '.' or an exponent, so that
//     Python's json reads the same int/float types).
// On failure either mode prints "ERROR <message>" and exits 1 (the status goes to stderr).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "native/algorithms/tuning_table.h"
#include "native/common/json.h"
#include "native/common/logging.h"

using mscclpp_nccl::JsonValue;
using mscclpp_nccl::Status;
using mscclpp_nccl::TuningChoice;
using mscclpp_nccl::TuningKey;
using mscclpp_nccl::TuningTable;

namespace {

void dumpString(const std::string& text, std::string* out) {
  out->push_back('"');
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char escape[8];
      snprintf(escape, sizeof(escape), "\\u%04x", c);
      *out += escape;
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

void dump(const JsonValue& value, std::string* out) {
  switch (value.type()) {
    case JsonValue::Type::kNull:
      *out += "null";
      break;
    case JsonValue::Type::kBool:
      *out += value.asBool() ? "true" : "false";
      break;
    case JsonValue::Type::kNumber: {
      if (value.isInteger()) {
        *out += std::to_string(value.asInt64());
        break;
      }
      char number[64];
      snprintf(number, sizeof(number), "%.17g", value.asDouble());
      *out += number;
      if (std::string(number).find_first_of(".en") == std::string::npos) *out += ".0";
      break;
    }
    case JsonValue::Type::kString:
      dumpString(value.asString(), out);
      break;
    case JsonValue::Type::kArray: {
      *out += '[';
      const char* separator = "";
      for (const JsonValue& item : value.asArray()) {
        *out += separator;
        dump(item, out);
        separator = ",";
      }
      *out += ']';
      break;
    }
    case JsonValue::Type::kObject: {
      *out += '{';
      const char* separator = "";
      for (const JsonValue::Member& member : value.asObject()) {
        *out += separator;
        dumpString(member.first, out);
        *out += ':';
        dump(member.second, out);
        separator = ",";
      }
      *out += '}';
      break;
    }
  }
}

int error(const std::string& message, int status) {
  printf("ERROR %s\n", message.c_str());
  fprintf(stderr, "status %d\n", status);
  return 1;
}

std::string readFile(const char* path) {
  std::string text;
  if (FILE* file = fopen(path, "rb")) {
    char buffer[65536];
    for (size_t n; (n = fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
    fclose(file);
  }
  return text;
}

int dumpJson(const char* path) {
  std::string text = readFile(path);
  JsonValue value;
  std::string message;
  if (!mscclpp_nccl::parseJson(text, &value, &message))
    return error(message, static_cast<int>(Status::kInvalidArgument));
  std::string out;
  dump(value, &out);
  printf("%s\n", out.c_str());
  return 0;
}

int loadedBytes(const char* path, std::vector<std::string> known) {
  if (known.empty()) known = {"allreduce_one_shot_packet"};
  TuningTable table;
  std::string bytes;
  Status status = TuningTable::load(path, known, &table, &bytes);
  if (status != Status::kSuccess) return error(mscclpp_nccl::lastError(), static_cast<int>(status));
  unsigned long long hash = 1469598103934665603ull;
  for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  printf("bytes %zu fnv %llu\n", bytes.size(), hash);
  return 0;
}

std::string describe(const TuningChoice* choice) {
  if (!choice) return "none";
  return choice->algorithm + " " + std::to_string(choice->blocks) + " " + std::to_string(choice->threads) +
         " " + std::to_string(choice->chunkBytes);
}

// "[sm_NN] GPU NAME nranks ranksPerGpu collective dtypeBytes bytes": the last five words are fixed, the
// rest is the name, after the GPU's architecture where the first word gives one.
bool parseQuery(const std::string& line, TuningKey* key) {
  std::istringstream words(line);
  std::vector<std::string> parts;
  for (std::string word; words >> word;) parts.push_back(word);
  if (parts.size() < 6) return false;
  const size_t first = parts[0].compare(0, 3, "sm_") == 0 ? 1 : 0;
  key->arch = first ? parts[0] : "";
  size_t n = parts.size();
  if (n < first + 6) return false;
  key->gpu.clear();
  for (size_t i = first; i + 5 < n; ++i) key->gpu += (i > first ? " " : "") + parts[i];
  char* end = nullptr;
  key->nranks = static_cast<int>(strtol(parts[n - 5].c_str(), &end, 10));
  key->ranksPerGpu = static_cast<int>(strtol(parts[n - 4].c_str(), &end, 10));
  key->collective = parts[n - 3];
  key->dtypeBytes = static_cast<int>(strtol(parts[n - 2].c_str(), &end, 10));
  key->bytes = strtoull(parts[n - 1].c_str(), &end, 10);
  return *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--json") return dumpJson(argv[2]);
  if (argc >= 3 && std::string(argv[1]) == "--bytes") return loadedBytes(argv[2], {argv + 3, argv + argc});
  bool fromString = argc >= 2 && std::string(argv[1]) == "--parse";
  if (argc < 2 + fromString) {
    fprintf(stderr, "usage: %s [--parse] TABLE [ALGORITHM...] | --json FILE\n", argv[0]);
    return 2;
  }
  const char* path = argv[1 + fromString];
  std::vector<std::string> known(argv + 2 + fromString, argv + argc);
  if (known.empty())
    known = {"allreduce_one_shot_packet", "allreduce_two_shot_packet", "exchange_packet", "p2p_packet"};
  TuningTable table;
  Status status =
      fromString ? TuningTable::parse(readFile(path), known, &table) : TuningTable::load(path, known, &table);
  if (status != Status::kSuccess) {
    if (table.entryCount() != 0 || !table.source.empty()) return error("table not left empty", 3);
    return error(mscclpp_nccl::lastError(), static_cast<int>(status));
  }
  fprintf(stderr, "loaded %zu entries from %s\n", table.entryCount(), table.source.c_str());

  for (std::string line; std::getline(std::cin, line);) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    TuningKey key;
    if (!parseQuery(line, &key)) {
      printf("BAD QUERY %s\n", line.c_str());
      continue;
    }
    TuningChoice full;
    const TuningChoice* viaKey = table.lookup(key, &full) ? &full : nullptr;
    TuningTable mine = table.filtered(key.gpu, key.arch, key.nranks, key.ranksPerGpu);
    const TuningChoice* viaFiltered = mine.find(key.collective.c_str(), key.dtypeBytes, key.bytes);
    std::string answer = describe(viaKey);
    if (answer != describe(viaFiltered)) answer = "MISMATCH " + answer + " / " + describe(viaFiltered);
    printf("%s\n", answer.c_str());
  }
  return 0;
}
