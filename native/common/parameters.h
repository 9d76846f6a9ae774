// The environment variables the library reads, in one table: their kind, their value when unset and
// what they do. The library reads them through it (readInteger and friends), and the ncclParam* queries
// (shim/parameters.cc) report them from it. Two are left out: the logging variables are read by
// logging.cc before anything else (they are in the table, with the values it assumes), and
// MSCCLPP_NCCL_COMM_SECRET is a key that no query may reveal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mscclpp_nccl {

enum class ParameterKind {
  kInteger,  // int64_t, decimal or 0x-prefixed hex
  kSeconds,  // double, finite
  kText,
};

struct Parameter {
  const char* key;  // the variable's name
  ParameterKind kind;
  double number;     // kInteger, kSeconds: the value when unset
  const char* text;  // kText: the value when unset
  const char* meaning;
};

enum class Param : size_t {
  kDebug,
  kDebugSubsys,
  kDebugTimestampLevels,
  kDebugTimestampFormat,
  kDebugFile,
  kSetThreadName,
  kCommId,
  kSocketIfname,
  kSocketFamily,
  kCumemEnable,
  kGraphMixingSupport,
  kWaitTimeout,
  kStallReport,
  kBootstrapTimeout,
  kScratchBytes,
  kChunkScratchBytes,
  kLaneScratchBytes,
  kTuningFile,
  kZeroCopy,
  kZeroCopyCaptureWait,
  kEarlyLaunch,
  kAlgo,
  kFallback,
  kFallbackLib,
  kPythonSite,
  kHierarchyMinBytes,
  kHostId,
  kCount,
};

const Parameter& parameter(Param which);
// The entry named `key` (exactly), or null.
const Parameter* findParameter(const char* key);
constexpr size_t parameterCount() { return static_cast<size_t>(Param::kCount); }
const Parameter& parameterAt(size_t index);

// Whether the variable is set (non-empty) in the environment.
bool parameterSet(const Parameter& entry);
// The value the library uses: the environment's when set and valid (a warning names an invalid one),
// else the entry's. For an entry of another kind these return the unset value of theirs: 0 or "".
int64_t readInteger(const Parameter& entry);
double readSeconds(const Parameter& entry);
std::string readText(const Parameter& entry);
// The value as text, whatever the kind: integers in decimal, seconds as %g; and the value when unset.
std::string readAsText(const Parameter& entry);
std::string unsetAsText(const Parameter& entry);

inline int64_t readInteger(Param which) { return readInteger(parameter(which)); }
inline double readSeconds(Param which) { return readSeconds(parameter(which)); }
inline std::string readText(Param which) { return readText(parameter(which)); }
// A duration parameter as nanoseconds, clamped to [0, 1e9 s] (a negative or huge value would not convert).
uint64_t readNanoseconds(Param which);

}  // namespace mscclpp_nccl
