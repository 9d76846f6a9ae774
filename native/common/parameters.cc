#include "native/common/parameters.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "native/common/env.h"

namespace mscclpp_nccl {
namespace {

using Kind = ParameterKind;

constexpr Parameter integer(const char* key, double value, const char* meaning) {
  return {key, Kind::kInteger, value, nullptr, meaning};
}
constexpr Parameter seconds(const char* key, double value, const char* meaning) {
  return {key, Kind::kSeconds, value, nullptr, meaning};
}
constexpr Parameter text(const char* key, const char* value, const char* meaning) {
  return {key, Kind::kText, 0.0, value, meaning};
}

// In the order of Param; README.md's table of environment variables says more of each.
constexpr Parameter kTable[] = {
    text("NCCL_DEBUG", "", "log level: VERSION, WARN or INFO (ABORT and TRACE as INFO)"),
    text("NCCL_DEBUG_SUBSYS", "ALL", "with INFO, the subsystems logged (comma-separated, ^ to invert)"),
    text("NCCL_DEBUG_TIMESTAMP_LEVELS", "WARN", "the levels whose lines start with a timestamp"),
    text("NCCL_DEBUG_TIMESTAMP_FORMAT", "[%F %T] ", "the timestamp's strftime format"),
    text("NCCL_DEBUG_FILE", "", "the log's file (%h host, %p process id) instead of stderr"),
    integer("NCCL_SET_THREAD_NAME", 0, "1: helper threads are named NCCL <role>, as stock names its own"),
    text("NCCL_COMM_ID", "", "host:port of the rendezvous, served by rank 0"),
    text("NCCL_SOCKET_IFNAME", "",
         "interfaces for the rendezvous (prefixes, ^ to exclude, = for exact names)"),
    text("NCCL_SOCKET_FAMILY", "", "AF_INET or AF_INET6 for the rendezvous"),
    integer("NCCL_CUMEM_ENABLE", 1, "0: ncclMemAlloc uses cudaMalloc instead of cuMem"),
    integer("NCCL_GRAPH_MIXING_SUPPORT", 1,
            "0: graph launches are not ordered against the comm's other work"),
    seconds("MSCCLPP_NCCL_WAIT_TIMEOUT", 0, "seconds a kernel may wait without progress (0: no limit)"),
    seconds("MSCCLPP_NCCL_STALL_REPORT", 60, "seconds without progress before a stalled call is reported"),
    seconds("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", 300, "seconds a rendezvous may take"),
    integer("MSCCLPP_NCCL_SCRATCH_BYTES", 8 << 20, "scratch each rank gives its peers' packets"),
    integer("MSCCLPP_NCCL_CHUNK_SCRATCH_BYTES", 32 << 20, "scratch each rank gives its peers' chunks"),
    integer("MSCCLPP_NCCL_LANE_SCRATCH_BYTES", 32 << 20, "earlier name of MSCCLPP_NCCL_CHUNK_SCRATCH_BYTES"),
    text("MSCCLPP_NCCL_TUNING_FILE", "", "tuning table (JSON); unset: the package's own"),
    integer("MSCCLPP_NCCL_ZERO_COPY", 1, "0: large collectives outside windows copy through scratch"),
    seconds("MSCCLPP_NCCL_ZERO_COPY_CAPTURE_WAIT", 2,
            "seconds a captured call waits for its peers' mappings"),
    integer("MSCCLPP_NCCL_EARLY_LAUNCH", 1, "0: no programmatic dependent launch"),
    text("MSCCLPP_NCCL_ALGO", "",
         "forced algorithms: [collective=]algorithm[/blocks[/threads[/chunk_bytes]]]"),
    text("MSCCLPP_NCCL_FALLBACK", "1",
         "several hosts: 1 hierarchical, 0 fail at init, all through stock NCCL"),
    text("MSCCLPP_NCCL_FALLBACK_LIB", "", "the stock libnccl.so.2 used between hosts"),
    text("MSCCLPP_NCCL_PYTHON_SITE", "", "site-packages directories searched for stock NCCL's package"),
    integer("MSCCLPP_NCCL_HIERARCHY_MIN_BYTES", 128 << 10,
            "over several hosts, smaller calls go to stock NCCL"),
    text("MSCCLPP_NCCL_HOST_ID", "", "ranks of one machine with the same text pose as one host"),
};
static_assert(sizeof(kTable) / sizeof(kTable[0]) == parameterCount(), "one entry per Param, in its order");

std::string integerText(int64_t value) {
  char text[32];
  snprintf(text, sizeof(text), "%lld", static_cast<long long>(value));
  return text;
}

std::string secondsText(double value) {
  char text[32];
  snprintf(text, sizeof(text), "%g", value);
  return text;
}

}  // namespace

const Parameter& parameter(Param which) { return kTable[static_cast<size_t>(which)]; }

const Parameter& parameterAt(size_t index) { return kTable[index]; }

const Parameter* findParameter(const char* key) {
  if (key == nullptr) return nullptr;
  for (const Parameter& entry : kTable)
    if (strcmp(entry.key, key) == 0) return &entry;
  return nullptr;
}

bool parameterSet(const Parameter& entry) {
  const char* value = getenv(entry.key);
  return value != nullptr && *value != '\0';
}

int64_t readInteger(const Parameter& entry) {
  return entry.kind == Kind::kInteger ? envInt(entry.key, static_cast<int64_t>(entry.number)) : 0;
}

double readSeconds(const Parameter& entry) {
  return entry.kind == Kind::kSeconds ? envDouble(entry.key, entry.number) : 0.0;
}

std::string readText(const Parameter& entry) {
  return entry.kind == Kind::kText ? envString(entry.key, entry.text) : std::string();
}

std::string readAsText(const Parameter& entry) {
  switch (entry.kind) {
    case Kind::kInteger:
      return integerText(readInteger(entry));
    case Kind::kSeconds:
      return secondsText(readSeconds(entry));
    case Kind::kText:
      break;
  }
  return readText(entry);
}

std::string unsetAsText(const Parameter& entry) {
  switch (entry.kind) {
    case Kind::kInteger:
      return integerText(static_cast<int64_t>(entry.number));
    case Kind::kSeconds:
      return secondsText(entry.number);
    case Kind::kText:
      break;
  }
  return entry.text;
}

uint64_t readNanoseconds(Param which) {
  return static_cast<uint64_t>(std::clamp(readSeconds(which), 0.0, 1e9) * 1e9);
}

}  // namespace mscclpp_nccl
