// The ncclParam* queries over the library's own parameters (native/common/parameters.h), as stock answers
// them over its registry: a handle is the parameter's entry (the same on every bind); a typed read needs
// the parameter's own type (integers here are int64_t, durations double, the rest text); values are read
// from the environment at each query; returned strings are the thread's until its next such query.
// Refusals are ncclInvalidArgument with ncclGetLastError saying why, and no WARN line, since callers
// probe keys (nccl4py's `params` mapping does).
#include "native/common/parameters.h"

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "native/common/logging.h"
#include "shim/api.h"

using mscclpp_nccl::Parameter;
using mscclpp_nccl::ParameterKind;

namespace {

ncclResult_t refuse(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
ncclResult_t refuse(const char* fmt, ...) {
  char text[256];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  mscclpp_nccl::setLastError(text);
  MSCCLPP_INFO(kEnv, "%s", text);
  return ncclInvalidArgument;
}

ncclParamHandle_t handleOf(const Parameter& entry) {
  return reinterpret_cast<ncclParamHandle_t>(const_cast<Parameter*>(&entry));
}

// The entry behind `handle`, or null where it is not one that ncclParamBind gave.
const Parameter* entryOf(ncclParamHandle_t handle) {
  for (size_t i = 0; i < mscclpp_nccl::parameterCount(); ++i)
    if (handleOf(mscclpp_nccl::parameterAt(i)) == handle) return &mscclpp_nccl::parameterAt(i);
  return nullptr;
}

const char* typeName(ParameterKind kind) {
  switch (kind) {
    case ParameterKind::kInteger:
      return "int64_t";
    case ParameterKind::kSeconds:
      return "double";
    case ParameterKind::kText:
      break;
  }
  return "const char*";
}

template <typename T>
ncclResult_t readTyped(ncclParamHandle_t handle, T* out, const char* function) {
  const Parameter* entry = entryOf(handle);
  if (entry == nullptr || out == nullptr)
    return refuse("%s: a null or unknown handle, or a null out", function);
  if (!std::is_same_v<T, int64_t> || entry->kind != ParameterKind::kInteger)
    return refuse("%s: %s is a %s parameter", function, entry->key, typeName(entry->kind));
  *out = static_cast<T>(mscclpp_nccl::readInteger(*entry));
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char* key), out, key) {
  if (out == nullptr || key == nullptr) return refuse("ncclParamBind: a null out or key");
  const Parameter* entry = mscclpp_nccl::findParameter(key);
  if (entry == nullptr) return refuse("ncclParamBind: no parameter is named \"%s\"", key);
  *out = handleOf(*entry);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out), h, out) {
  return readTyped(h, out, "ncclParamGetI8");
}

NCCL_API(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out), h, out) {
  return readTyped(h, out, "ncclParamGetI16");
}

NCCL_API(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out), h, out) {
  return readTyped(h, out, "ncclParamGetI32");
}

NCCL_API(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out), h, out) {
  return readTyped(h, out, "ncclParamGetI64");
}

NCCL_API(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out), h, out) {
  return readTyped(h, out, "ncclParamGetU8");
}

NCCL_API(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out), h, out) {
  return readTyped(h, out, "ncclParamGetU16");
}

NCCL_API(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out), h, out) {
  return readTyped(h, out, "ncclParamGetU32");
}

NCCL_API(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out), h, out) {
  return readTyped(h, out, "ncclParamGetU64");
}

NCCL_API(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out), h, out) {
  const Parameter* entry = entryOf(h);
  if (entry == nullptr || out == nullptr)
    return refuse("ncclParamGetStr: a null or unknown handle, or a null out");
  if (entry->kind != ParameterKind::kText)
    return refuse("ncclParamGetStr: %s is a %s parameter", entry->key, typeName(entry->kind));
  thread_local std::string value;
  value = mscclpp_nccl::readText(*entry);
  *out = value.c_str();
  return ncclSuccess;
}

// The value's bytes as the library holds it: an int64_t, a double, or the text with its terminator.
NCCL_API(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len), h, out, maxLen,
         len) {
  const Parameter* entry = entryOf(h);
  if (entry == nullptr || out == nullptr || len == nullptr || maxLen <= 0)
    return refuse("ncclParamGet: a null or unknown handle, a null out or len, or maxLen %d", maxLen);
  int64_t integer = 0;
  double seconds = 0.0;
  std::string text;
  const void* bytes = nullptr;
  size_t size = 0;
  switch (entry->kind) {
    case ParameterKind::kInteger:
      integer = mscclpp_nccl::readInteger(*entry);
      bytes = &integer, size = sizeof(integer);
      break;
    case ParameterKind::kSeconds:
      seconds = mscclpp_nccl::readSeconds(*entry);
      bytes = &seconds, size = sizeof(seconds);
      break;
    case ParameterKind::kText:
      text = mscclpp_nccl::readText(*entry);
      bytes = text.c_str(), size = text.size() + 1;
      break;
  }
  if (size > static_cast<size_t>(maxLen)) {
    *len = 0;  // as stock: not the size needed
    return refuse("ncclParamGet: %s takes %zu bytes, more than maxLen %d", entry->key, size, maxLen);
  }
  memcpy(out, bytes, size);
  *len = static_cast<int>(size);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetParameter, (const char* key, const char** value, int* valueLen), key,
         value, valueLen) {
  if (key == nullptr || value == nullptr || valueLen == nullptr)
    return refuse("ncclParamGetParameter: a null key, value or valueLen");
  const Parameter* entry = mscclpp_nccl::findParameter(key);
  if (entry == nullptr) {
    *value = nullptr;
    *valueLen = 0;
    return refuse("ncclParamGetParameter: no parameter is named \"%s\"", key);
  }
  thread_local std::string text;
  text = mscclpp_nccl::readAsText(*entry);
  *value = text.c_str();
  *valueLen = static_cast<int>(text.size());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen), table, tableLen) {
  if (table == nullptr || tableLen == nullptr)
    return refuse("ncclParamGetAllParameterKeys: a null table or tableLen");
  thread_local std::vector<const char*> keys;
  keys.clear();
  for (size_t i = 0; i < mscclpp_nccl::parameterCount(); ++i)
    keys.push_back(mscclpp_nccl::parameterAt(i).key);
  *table = keys.data();
  *tableLen = static_cast<int>(keys.size());
  return ncclSuccess;
}

// To stdout, in stock's layout.
NCCL_API(void, ncclParamDumpAll, (void)) {
  std::string dump = "=== ncclParam Registry Dump ===\n";
  for (size_t i = 0; i < mscclpp_nccl::parameterCount(); ++i) {
    const Parameter& entry = mscclpp_nccl::parameterAt(i);
    const bool set = mscclpp_nccl::parameterSet(entry);
    dump += std::string(entry.key) + " (" + typeName(entry.kind) + ") [] " + entry.meaning +
            "\n    Current value=" + mscclpp_nccl::readAsText(entry) +
            " set_by=" + (set ? "Environment" : "Default") + " default=" + mscclpp_nccl::unsetAsText(entry) +
            "\n\n";
  }
  fputs(dump.c_str(), stdout);
  fflush(stdout);
}
