#include "native/algorithms/tuning_table.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "native/common/json.h"
#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

constexpr const char* kFormat = "mscclpp-nccl-tuning";
constexpr int64_t kVersion = 1;
// A machine's table has tens of entries (the shipped one: 42 in 20 KB). Every communicator init reads
// it, so a runaway or hostile file must not cost much memory or time there (a 10 MB file of a million
// keys took 170 MB and a second): beyond these bounds it is refused and the built-in rules apply.
constexpr size_t kMaxTableBytes = 1u << 20;
constexpr size_t kMaxEntries = 4096;
constexpr size_t kMaxRules = 256;  // per entry
constexpr size_t kMaxValues = 1u << 17;
constexpr const char* kCollectives[] = {"all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast",
                                        "reduce",     "gather",         "scatter",    "sendrecv"};

template <typename Names>
std::string joined(const Names& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

}  // namespace

// Validates a parsed document field by field and builds the entries; the first problem found wins.
class TuningTableBuilder {
 public:
  TuningTableBuilder(const std::string& text, const std::vector<std::string>& knownAlgorithms)
      : text_(text), known_(knownAlgorithms) {}

  bool build(const JsonValue& doc, std::vector<TuningTable::Entry>* entries) {
    if (!doc.isObject()) return bad(doc, "document", "expected an object, got " + describe(doc));
    if (!onlyFields(doc, "document", {"format", "version", "entries"})) return false;
    const JsonValue* format = doc.get("format");
    if (!format) return bad(doc, "document", std::string("missing field \"format\": \"") + kFormat + "\"");
    if (format->asString() != kFormat)
      return bad(*format, "format", std::string("expected \"") + kFormat + "\", got " + describe(*format));
    const JsonValue* version = doc.get("version");
    if (!version) return bad(doc, "document", "missing field \"version\": 1");
    if (!version->isInteger() || version->asInt64() != kVersion)
      return bad(*version, "version", "unsupported version " + describe(*version) + ", this library reads 1");
    const JsonValue* list = doc.get("entries");
    if (!list) return bad(doc, "document", "missing field \"entries\"");
    if (!list->isArray()) return bad(*list, "entries", "expected an array, got " + describe(*list));
    if (list->asArray().size() > kMaxEntries)
      return bad(*list, "entries", "more than " + std::to_string(kMaxEntries) + " entries");
    for (size_t i = 0; i < list->asArray().size(); ++i) {
      entries->emplace_back();
      if (!buildEntry(list->asArray()[i], "entries[" + std::to_string(i) + "]", &entries->back()))
        return false;
    }
    return true;
  }

  // Parses `json` into *out (left empty on failure, with the reason in *error).
  static bool parse(const std::string& json, const std::vector<std::string>& knownAlgorithms,
                    TuningTable* out, std::string* error) {
    JsonLimits limits;
    limits.maxBytes = kMaxTableBytes;
    limits.maxValues = kMaxValues;
    JsonValue doc;
    if (!parseJson(json, &doc, error, limits)) return false;
    TuningTableBuilder builder(json, knownAlgorithms);
    TuningTable table;
    if (!builder.build(doc, &table.entries_)) {
      *error = builder.error_;
      return false;
    }
    std::stable_sort(table.entries_.begin(), table.entries_.end(),
                     [](const TuningTable::Entry& a, const TuningTable::Entry& b) {
                       return a.specificity > b.specificity;
                     });
    *out = std::move(table);
    return true;
  }

 private:
  bool buildEntry(const JsonValue& json, const std::string& path, TuningTable::Entry* entry) {
    if (!json.isObject()) return bad(json, path, "expected an object, got " + describe(json));
    if (!onlyFields(json, path,
                    {"gpu", "arch", "nranks", "ranks_per_gpu", "collective", "dtype_bytes", "rules"}))
      return false;
    const JsonValue* gpu = required(json, path, "gpu");
    if (!gpu) return false;
    if (!gpu->isString() || gpu->asString().empty())
      return bad(*gpu, path + ".gpu", "expected a device name or \"*\", got " + describe(*gpu));
    entry->gpu = gpu->asString() == "*" ? "" : gpu->asString();
    if (const JsonValue* arch = json.get("arch")) {
      if (!isArchName(*arch))
        return bad(*arch, path + ".arch", "expected \"sm_\" and digits, got " + describe(*arch));
      if (entry->gpu.empty())
        return bad(*arch, path + ".arch", "names the architecture of no GPU (gpu is \"*\")");
      entry->arch = arch->asString();
    }

    int64_t value = 0;
    const JsonValue* nranks = required(json, path, "nranks");
    if (!nranks || !wildcardOrInt(*nranks, path + ".nranks", &value)) return false;
    entry->nranks = static_cast<int>(value);
    const JsonValue* perGpu = required(json, path, "ranks_per_gpu");
    if (!perGpu || !wildcardOrInt(*perGpu, path + ".ranks_per_gpu", &value)) return false;
    entry->ranksPerGpu = static_cast<int>(value);
    if (entry->nranks > 0 && entry->ranksPerGpu > entry->nranks)
      return bad(*perGpu, path + ".ranks_per_gpu",
                 describe(*perGpu) + " is larger than nranks " + describe(*nranks));

    const JsonValue* collective = required(json, path, "collective");
    if (!collective) return false;
    for (const char* name : kCollectives)
      if (collective->isString() && collective->asString() == name) entry->collective = name;
    if (!*entry->collective)
      return bad(*collective, path + ".collective",
                 "expected one of " + joined(kCollectives) + ", got " + describe(*collective));

    if (const JsonValue* dtype = json.get("dtype_bytes")) {
      bool wildcard = dtype->isString() && dtype->asString() == "*";
      int64_t size = dtype->asInt64();
      if (!wildcard && (!dtype->isInteger() || (size != 1 && size != 2 && size != 4 && size != 8)))
        return bad(*dtype, path + ".dtype_bytes", "expected 1, 2, 4, 8 or \"*\", got " + describe(*dtype));
      entry->dtypeBytes = wildcard ? 0 : static_cast<int>(size);
    }
    entry->specificity =
        !entry->gpu.empty() + (entry->nranks > 0) + (entry->ranksPerGpu > 0) + (entry->dtypeBytes > 0);

    const JsonValue* rules = required(json, path, "rules");
    if (!rules) return false;
    if (!rules->isArray()) return bad(*rules, path + ".rules", "expected an array, got " + describe(*rules));
    if (rules->asArray().empty())
      return bad(*rules, path + ".rules", "is empty: an entry needs at least one rule");
    if (rules->asArray().size() > kMaxRules)
      return bad(*rules, path + ".rules", "more than " + std::to_string(kMaxRules) + " rules");
    for (size_t i = 0; i < rules->asArray().size(); ++i) {
      std::string rulePath = path + ".rules[" + std::to_string(i) + "]";
      entry->rules.emplace_back();
      if (!buildRule(rules->asArray()[i], rulePath, &entry->rules.back())) return false;
      if (i == 0) continue;
      const TuningTable::Rule& previous = entry->rules[i - 1];
      const JsonValue& maxBytes = *rules->asArray()[i].get("max_bytes");
      if (previous.maxBytes == SIZE_MAX)
        return bad(maxBytes, rulePath, "follows a rule with \"max_bytes\": null, which must be the last");
      if (entry->rules.back().maxBytes <= previous.maxBytes)
        return bad(maxBytes, rulePath + ".max_bytes",
                   "rules must be sorted by strictly increasing max_bytes, but " + describe(maxBytes) +
                       " follows " + std::to_string(previous.maxBytes));
    }
    return true;
  }

  bool buildRule(const JsonValue& json, const std::string& path, TuningTable::Rule* rule) {
    if (!json.isObject()) return bad(json, path, "expected an object, got " + describe(json));
    if (!onlyFields(json, path, {"max_bytes", "algorithm", "blocks", "threads", "chunk_bytes"})) return false;
    int64_t value = 0;
    const JsonValue* maxBytes = required(json, path, "max_bytes");
    if (!maxBytes) return false;
    rule->maxBytes = SIZE_MAX;
    if (!maxBytes->isNull()) {
      if (!integer(*maxBytes, path + ".max_bytes", 0, INT64_MAX, 1, "a non-negative integer or null", &value))
        return false;
      rule->maxBytes = static_cast<size_t>(value);
    }

    const JsonValue* algorithm = required(json, path, "algorithm");
    if (!algorithm) return false;
    if (!algorithm->isString() ||
        std::find(known_.begin(), known_.end(), algorithm->asString()) == known_.end())
      return bad(*algorithm, path + ".algorithm",
                 "unknown algorithm " + describe(*algorithm) + " (known: " + joined(known_) + ")");
    rule->choice.algorithm = algorithm->asString();

    if (const JsonValue* blocks = json.get("blocks")) {
      if (!integer(*blocks, path + ".blocks", 1, 1024, 1, "an integer from 1 to 1024", &value)) return false;
      rule->choice.blocks = static_cast<int>(value);
    }
    if (const JsonValue* threads = json.get("threads")) {
      if (!integer(*threads, path + ".threads", 32, 1024, 32, "a multiple of 32 from 32 to 1024", &value))
        return false;
      rule->choice.threads = static_cast<int>(value);
    }
    if (const JsonValue* chunk = json.get("chunk_bytes")) {
      if (!integer(*chunk, path + ".chunk_bytes", 8, INT64_MAX, 8, "a positive multiple of 8", &value))
        return false;
      rule->choice.chunkBytes = static_cast<size_t>(value);
    }
    return true;
  }

  bool onlyFields(const JsonValue& object, const std::string& path,
                  std::initializer_list<const char*> allowed) {
    for (const JsonValue::Member& member : object.asObject()) {
      bool known = false;
      for (const char* name : allowed) known = known || member.first == name;
      if (known) continue;
      return bad(member.second, path,
                 "unknown field \"" + member.first + "\" (allowed: " + joined(allowed) + ")");
    }
    return true;
  }

  const JsonValue* required(const JsonValue& object, const std::string& path, const char* field) {
    const JsonValue* value = object.get(field);
    if (!value) bad(object, path, std::string("missing field \"") + field + "\"");
    return value;
  }

  // An integer in [lo, hi] that is a multiple of `multiple`; `expected` says so in words for the message.
  bool integer(const JsonValue& json, const std::string& path, int64_t lo, int64_t hi, int64_t multiple,
               const std::string& expected, int64_t* out) {
    int64_t value = json.asInt64();
    if (!json.isInteger() || value < lo || value > hi || value % multiple != 0)
      return bad(json, path, "expected " + expected + ", got " + describe(json));
    *out = value;
    return true;
  }

  // "sm_" and one to three digits, as the library spells a compute capability.
  static bool isArchName(const JsonValue& json) {
    if (!json.isString()) return false;
    const std::string& text = json.asString();
    if (text.size() < 4 || text.size() > 6 || text.compare(0, 3, "sm_") != 0) return false;
    return std::all_of(text.begin() + 3, text.end(), [](char c) { return c >= '0' && c <= '9'; });
  }

  // A positive int or "*" (which gives 0).
  bool wildcardOrInt(const JsonValue& json, const std::string& path, int64_t* out) {
    *out = 0;
    if (json.isString() && json.asString() == "*") return true;
    return integer(json, path, 1, INT32_MAX, 1, "a positive integer or \"*\"", out);
  }

  // A value as the user wrote it, for messages: numbers in their literal spelling (1.0 must not read as 1).
  std::string describe(const JsonValue& json) const {
    if (json.isString()) return "\"" + json.asString() + "\"";
    if (json.isBool()) return json.asBool() ? "true" : "false";
    if (!json.isNumber()) return JsonValue::typeName(json.type());
    size_t end = json.offset();
    while (end < text_.size() && text_[end] != '\0' && strchr("+-.eE0123456789", text_[end])) ++end;
    return text_.substr(json.offset(), end - json.offset());
  }

  bool bad(const JsonValue& at, const std::string& path, const std::string& what) {
    error_ = path + ": " + what + " (" + jsonPosition(text_, at.offset()) + ")";
    return false;
  }

  const std::string& text_;
  const std::vector<std::string>& known_;
  std::string error_;
};

const TuningChoice* TuningTable::findIn(const char* collective, int dtypeBytes, size_t bytes,
                                        const TuningKey* key) const {
  const bool standIn = key && !namesGpu(key->gpu);
  for (const Entry& entry : entries_) {
    if (strcmp(entry.collective, collective) != 0) continue;
    if (entry.dtypeBytes && entry.dtypeBytes != dtypeBytes) continue;
    if (key && !entry.matchesComm(key->gpu, key->arch, standIn, key->nranks, key->ranksPerGpu)) continue;
    // Rules are sorted by maxBytes: the first one at or above `bytes` covers it.
    auto rule = std::lower_bound(entry.rules.begin(), entry.rules.end(), bytes,
                                 [](const Rule& r, size_t size) { return r.maxBytes < size; });
    if (rule != entry.rules.end()) return &rule->choice;
  }
  return nullptr;
}

bool TuningTable::Entry::matchesComm(const std::string& gpuName, const std::string& gpuArch, bool standIn,
                                     int nranksOfComm, int ranksPerGpuOfComm) const {
  const bool gpuMatches = gpu.empty() || gpu == gpuName || (standIn && !arch.empty() && arch == gpuArch);
  return gpuMatches && (nranks == 0 || nranks == nranksOfComm) &&
         (ranksPerGpu == 0 || ranksPerGpu == ranksPerGpuOfComm);
}

bool TuningTable::namesGpu(const std::string& gpu) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& entry) { return entry.gpu == gpu; });
}

const TuningChoice* TuningTable::find(const char* collective, int dtypeBytes, size_t bytes) const {
  return findIn(collective, dtypeBytes, bytes, nullptr);
}

bool TuningTable::lookup(const char* collective, int dtypeBytes, size_t bytes, TuningChoice* out) const {
  const TuningChoice* choice = find(collective, dtypeBytes, bytes);
  if (choice) *out = *choice;
  return choice != nullptr;
}

bool TuningTable::lookup(const TuningKey& key, TuningChoice* out) const {
  const TuningChoice* choice = findIn(key.collective.c_str(), key.dtypeBytes, key.bytes, &key);
  if (choice) *out = *choice;
  return choice != nullptr;
}

TuningTable TuningTable::filtered(const std::string& gpu, const std::string& arch, int nranks,
                                  int ranksPerGpu) const {
  TuningTable table;
  table.source = source;
  const bool standIn = !namesGpu(gpu);
  for (const Entry& entry : entries_)
    if (entry.matchesComm(gpu, arch, standIn, nranks, ranksPerGpu)) table.entries_.push_back(entry);
  return table;
}

Status TuningTable::parse(const std::string& json, const std::vector<std::string>& knownAlgorithms,
                          TuningTable* out) {
  *out = TuningTable();
  std::string error;
  if (!TuningTableBuilder::parse(json, knownAlgorithms, out, &error))
    return fail(Status::kInvalidArgument, "tuning table: %s", error.c_str());
  return Status::kSuccess;
}

Status TuningTable::load(const std::string& path, const std::vector<std::string>& knownAlgorithms,
                         TuningTable* out, std::string* bytes) {
  *out = TuningTable();
  if (bytes) bytes->clear();
  FILE* file = fopen(path.c_str(), "rb");
  if (!file)
    return fail(Status::kSystemError, "cannot open tuning table %s: %s", path.c_str(), strerror(errno));
  // Stop reading once past the limit: an oversized file (or /dev/zero) is refused, not slurped.
  const size_t limit = kMaxTableBytes;
  std::string text;
  char buffer[16384];
  size_t n;
  while (text.size() <= limit && (n = fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  int readError = ferror(file) ? errno : 0;
  fclose(file);
  if (readError)
    return fail(Status::kSystemError, "cannot read tuning table %s: %s", path.c_str(), strerror(readError));
  if (text.size() > limit)
    return fail(Status::kInvalidArgument, "tuning table %s: larger than the limit of %zu bytes", path.c_str(),
                limit);
  std::string error;
  if (!TuningTableBuilder::parse(text, knownAlgorithms, out, &error))
    return fail(Status::kInvalidArgument, "tuning table %s: %s", path.c_str(), error.c_str());
  out->source = path;
  if (bytes) *bytes = std::move(text);
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
