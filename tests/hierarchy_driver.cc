// Drives native/fallback/hierarchy.cc, fallback_mode.cc and native/transport/host_identity.cc on the CPU
// for tests/test_hierarchy.py. Reads queries from stdin, one a line, and ends each answer with "end":
//   layout ID...                  the layout of ranks on those host ids (rank order): "hosts H regular 0|1
//                                 multi 0|1 teams 0|1", then per rank "rank R host H local L size S intra A,B
//                                 rail C,D"
//   path MODE ID...               choosePath with MSCCLPP_NCCL_FALLBACK=MODE ("-" for unset): "PATH WHY"
//   plan COLL COUNT ELEM GRAIN ID...   every rank's hierarchicalPlan (COLL all_reduce, all_gather or
//                                 reduce_scatter): per step "rank R step K intra|rail OP" then one
//                                 " OFFSET+BYTES" per range of each member, members split by " |";
//                                 "rank R none" when there is no plan
//   mode                          MSCCLPP_NCCL_FALLBACK of the environment, as fallbackModeName spells it
//   hostid PHYSICAL [OVERRIDE]    layoutHostId (without OVERRIDE: from MSCCLPP_NCCL_HOST_ID)
//   stockhost PHYSICAL LAYOUT     stockHostId: the NCCL_HOSTID given to stock, "-" for none
//   physical                      physicalHostId() twice, to show it is stable
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "native/fallback/fallback_mode.h"
#include "native/fallback/hierarchy.h"
#include "native/transport/host_identity.h"

using namespace mscclpp_nccl;

namespace {

std::vector<uint64_t> readIds(std::istringstream& in) {
  std::vector<uint64_t> ids;
  std::string word;
  while (in >> word) ids.push_back(strtoull(word.c_str(), nullptr, 0));
  return ids;
}

std::string joined(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? "," : "") + std::to_string(ranks[i]);
  return text;
}

void printLayout(const HostLayout& layout) {
  printf("hosts %d regular %d multi %d teams %d\n", layout.nhosts(), layout.regular, layout.multiHost(),
         layout.hostsAreTeams());
  for (int r = 0; r < layout.nranks; ++r)
    printf("rank %d host %d local %d size %d intra %s rail %s\n", r, layout.hostOf[r], layout.localRankOf[r],
           layout.localSize(r), joined(layout.intraMembers(r)).c_str(),
           joined(layout.railMembers(r)).c_str());
}

const char* opName(PlanOp op) {
  return op == PlanOp::kAllReduce ? "all_reduce" : op == PlanOp::kAllGather ? "all_gather" : "reduce_scatter";
}

void printPlans(const std::string& collective, size_t count, size_t elemBytes, size_t grain,
                const HostLayout& layout) {
  const PlanCollective coll = collective == "all_reduce"   ? PlanCollective::kAllReduce
                              : collective == "all_gather" ? PlanCollective::kAllGather
                                                           : PlanCollective::kReduceScatter;
  for (int r = 0; r < layout.nranks; ++r) {
    std::vector<PlanStep> steps;
    if (!hierarchicalPlan(layout, r, coll, count, elemBytes, grain, &steps)) {
      printf("rank %d none\n", r);
      continue;
    }
    for (size_t k = 0; k < steps.size(); ++k) {
      printf("rank %d step %zu %s %s", r, k, steps[k].comm == PlanComm::kIntra ? "intra" : "rail",
             opName(steps[k].op));
      for (size_t m = 0; m < steps[k].members.size(); ++m) {
        if (m) printf(" |");
        for (const ByteRange& range : steps[k].members[m]) printf(" %zu+%zu", range.offset, range.bytes);
      }
      printf("\n");
    }
  }
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string command;
    in >> command;
    if (command == "layout") {
      printLayout(hostLayout(readIds(in)));
    } else if (command == "path") {
      std::string mode;
      in >> mode;
      const PathChoice choice =
          choosePath(parseFallbackMode(mode == "-" ? nullptr : mode.c_str()), hostLayout(readIds(in)));
      printf("%s %s\n", commPathName(choice.path), choice.why.c_str());
    } else if (command == "plan") {
      std::string collective;
      size_t count = 0, elemBytes = 0, grain = 0;
      in >> collective >> count >> elemBytes >> grain;
      printPlans(collective, count, elemBytes, grain, hostLayout(readIds(in)));
    } else if (command == "mode") {
      printf("%s\n", fallbackModeName(fallbackMode()));
    } else if (command == "hostid") {
      std::string physical, override;
      in >> physical;
      const uint64_t id = strtoull(physical.c_str(), nullptr, 0);
      printf("%" PRIu64 "\n", (in >> override) ? layoutHostId(id, override) : layoutHostIdFromEnv(id));
    } else if (command == "stockhost") {
      std::string physical, layout;
      in >> physical >> layout;
      const std::string name =
          stockHostId(strtoull(physical.c_str(), nullptr, 0), strtoull(layout.c_str(), nullptr, 0));
      printf("%s\n", name.empty() ? "-" : name.c_str());
    } else if (command == "physical") {
      printf("%" PRIu64 " %" PRIu64 "\n", physicalHostId(), physicalHostId());
    } else {
      printf("unknown %s\n", command.c_str());
    }
    printf("end\n");
    fflush(stdout);
  }
  return 0;
}
