// The per-machine tuning table: which algorithm and launch shape to use for a collective, by GPU model,
// communicator shape, element size and message size. Written by the Python tuner, read by the selector.
//
// Format (JSON, at most 1 MiB, 4096 entries and 256 rules an entry):
//
//   {"format": "mscclpp-nccl-tuning", "version": 1,
//    "entries": [
//      {"gpu": "NVIDIA H200", "arch": "sm_90", "nranks": 4, "ranks_per_gpu": 4, "collective": "all_reduce",
//       "dtype_bytes": 2,
//       "rules": [{"max_bytes": 65536, "algorithm": "allreduce_one_shot_packet", "blocks": 8, "threads":
//       512},
//                 {"max_bytes": null, "algorithm": "allreduce_two_shot_packet", "chunk_bytes": 32768}]}]}
//
// Entry fields (all required except arch and dtype_bytes):
//   gpu            the CUDA device name (cudaDeviceProp::name), or "*" for any
//   arch           that device's architecture, "sm_" and its compute capability's digits ("sm_90"), so
//                  that the entry can stand in for other GPUs of the architecture (below)
//   nranks         ranks in the communicator: a positive integer, or "*"
//   ranks_per_gpu  ranks sharing one GPU: a positive integer (not above nranks), or "*"
//   collective     all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, gather, scatter
//                  or sendrecv
//   dtype_bytes    element size 1, 2, 4 or 8, or "*" or absent for any
//   rules          a non-empty array sorted by strictly increasing max_bytes
// Rule fields:
//   max_bytes      required: the rule covers messages of at most this many bytes (a non-negative integer),
//                  or null for no limit (last rule only)
//   algorithm      required: an algorithm name the library registers
//   blocks         optional, 1..1024
//   threads        optional, 32..1024 and a multiple of 32
//   chunk_bytes    optional, a positive multiple of 8
// Absent optional fields mean "the algorithm's default". Numbers must be integer literals (4, not 4.0),
// and unknown fields are errors: a typo must fail loudly rather than be silently ignored.
//
// Lookup: of the entries that match (a wildcard matches anything), the most specific (most non-wildcard
// fields among gpu, nranks, ranks_per_gpu and dtype_bytes; ties go to the earlier entry) answers with
// its first rule whose max_bytes >= the message size. When its rules stop below the size, the next most
// specific matching entry is asked, and so on; when none covers the size, there is no answer and the
// selector falls back to its built-in rules. A GPU that no entry names is matched by the entries that name
// another GPU of its architecture (their arch), as if they named it: a table tuned on one chip serves the
// others of its generation (same SMs and links, other memory) until they are tuned themselves.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "native/common/status.h"

namespace mscclpp_nccl {

struct TuningChoice {
  std::string algorithm;
  int blocks = 0;  // 0 = algorithm default (also threads and chunkBytes)
  int threads = 0;
  size_t chunkBytes = 0;
};

struct TuningKey {
  std::string gpu;
  std::string arch;  // "sm_90"; "" = unknown (no entry stands in)
  int nranks;
  int ranksPerGpu;
  std::string collective;
  int dtypeBytes;
  size_t bytes;
};

class TuningTable {
 public:
  // Parses and validates `json`; `knownAlgorithms` lists every algorithm name the library has (a name
  // outside it is an error). On failure returns kInvalidArgument with a message naming the problem, the
  // entry/rule index and field, and the line and column; *out is left empty.
  static Status parse(const std::string& json, const std::vector<std::string>& knownAlgorithms,
                      TuningTable* out);
  // parse() of a file, setting `source` to `path`. A file that cannot be read gives kSystemError. The
  // file is read once, and at most 1 MiB of it: on success *bytes (when given) holds what was parsed,
  // for a fingerprint of exactly that.
  static Status load(const std::string& path, const std::vector<std::string>& knownAlgorithms,
                     TuningTable* out, std::string* bytes = nullptr);

  // The rule for `key`, or false when no entry matches.
  bool lookup(const TuningKey& key, TuningChoice* out) const;

  // The per-call forms, for a table returned by filtered(): they ignore gpu, nranks and ranks per GPU
  // (filtered() already did) and allocate nothing. find() returns the table's own choice (valid while
  // the table lives) or nullptr; lookup() copies it, which reuses out->algorithm's buffer when it can.
  const TuningChoice* find(const char* collective, int dtypeBytes, size_t bytes) const;
  bool lookup(const char* collective, int dtypeBytes, size_t bytes, TuningChoice* out) const;

  // The entries that can match a communicator of this GPU model (name and architecture) and shape, in
  // lookup order.
  TuningTable filtered(const std::string& gpu, const std::string& arch, int nranks, int ranksPerGpu) const;
  // Whether an entry names this GPU; when none does, entries of its architecture stand in.
  bool namesGpu(const std::string& gpu) const;

  size_t entryCount() const { return entries_.size(); }

  std::string source;  // path it came from (for logs)

 private:
  friend class TuningTableBuilder;

  struct Rule {
    size_t maxBytes;  // SIZE_MAX = no limit
    TuningChoice choice;
  };
  struct Entry {
    std::string gpu;   // "" = any
    std::string arch;  // "" = not given
    int nranks = 0;    // 0 = any (also ranksPerGpu and dtypeBytes)
    int ranksPerGpu = 0;
    const char* collective = "";  // one of the static collective names
    int dtypeBytes = 0;
    int specificity = 0;  // non-wildcard fields among gpu, nranks, ranksPerGpu and dtypeBytes
    std::vector<Rule> rules;

    // standIn: no entry names gpuName, so an entry of its architecture answers for it.
    bool matchesComm(const std::string& gpuName, const std::string& gpuArch, bool standIn, int nranksOfComm,
                     int ranksPerGpuOfComm) const;
  };

  const TuningChoice* findIn(const char* collective, int dtypeBytes, size_t bytes,
                             const TuningKey* key) const;

  std::vector<Entry> entries_;  // most specific first; file order among equals
};

}  // namespace mscclpp_nccl
