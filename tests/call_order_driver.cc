// Drives native/call_order.cc on the CPU: each stdin line is one call of a communicator, "eager STREAM"
// or "capture STREAM CAPTURE_ID"; each output line is that call's plan, as the names of the steps it
// asks for ("-" for none), in a fixed order. `--no-graph-mixing` is NCCL_GRAPH_MIXING_SUPPORT=0.
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include "native/call_order.h"

int main(int argc, char** argv) {
  mscclpp_nccl::CallOrder order(!(argc > 1 && std::string(argv[1]) == "--no-graph-mixing"));
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string mode;
    uintptr_t stream = 0;
    uint64_t capture = 0;
    words >> mode >> stream;
    if (mode == "capture") words >> capture;
    const mscclpp_nccl::OrderPlan plan = order.plan(stream, mode == "capture" ? capture : 0);
    std::string steps;
    auto add = [&](bool on, const char* name) {
      if (on) steps += (steps.empty() ? "" : " ") + std::string(name);
    };
    add(plan.waitDone, "wait_done");
    add(plan.joinCapture, "join_capture");
    add(plan.recordDone, "record_done");
    add(plan.recordNode, "record_node");
    std::cout << (steps.empty() ? "-" : steps) << '\n';
  }
  return 0;
}
