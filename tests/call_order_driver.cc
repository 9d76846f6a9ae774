// Drives native/call_order.cc on the CPU: each stdin line is one call of a communicator, "eager STREAM",
// "eager STREAM kernel" (its work ends with a kernel that publishes the ticket it was given) or
// "capture STREAM CAPTURE_ID"; each output line is that call's plan and how its end was marked, as the
// names of the steps in a fixed order ("-" for none). A line "mark" marks every call so far
// (ncclCommRevoke) and prints the ticket `done` must first cover ("cover_ticket N"), or "-"; a line
// "captured?" prints whether any call so far was captured ("yes"/"no", what ncclCommSuspend asks). Flags:
// `--no-graph-mixing` is NCCL_GRAPH_MIXING_SUPPORT=0, `--no-tickets` a device whose streams cannot wait on
// device memory.
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include "native/call_order.h"

int main(int argc, char** argv) {
  bool graphMixing = true, tickets = true;
  for (int i = 1; i < argc; ++i) {
    graphMixing = graphMixing && std::string(argv[i]) != "--no-graph-mixing";
    tickets = tickets && std::string(argv[i]) != "--no-tickets";
  }
  mscclpp_nccl::CallOrder order(graphMixing, tickets);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string mode, work;
    uintptr_t stream = 0;
    uint64_t capture = 0;
    words >> mode >> stream;
    if (mode == "mark") {
      const uint64_t ticket = order.takeDoneTicket();
      std::cout << (ticket != 0 ? "cover_ticket " + std::to_string(ticket) : "-") << '\n';
      continue;
    }
    if (mode == "captured?") {
      std::cout << (order.everCaptured() ? "yes" : "no") << '\n';
      continue;
    }
    if (mode == "capture")
      words >> capture;
    else
      words >> work;
    const mscclpp_nccl::OrderPlan plan = order.plan(stream, mode == "capture" ? capture : 0);
    std::string steps;
    auto add = [&](bool on, const std::string& name) {
      if (on) steps += (steps.empty() ? "" : " ") + name;
    };
    add(plan.coverTicket != 0, "cover_ticket " + std::to_string(plan.coverTicket));
    add(plan.waitDone && plan.waitTicket != 0, "wait_ticket " + std::to_string(plan.waitTicket));
    add(plan.waitDone && plan.waitTicket == 0, "wait_done");
    add(plan.joinCapture, "join_capture");
    if (plan.recordDone) {
      const uint64_t ticket = order.nextTicket();
      const uint64_t published = work == "kernel" ? ticket : 0;
      add(published != 0, "ticket " + std::to_string(published));
      add(published == 0, "record_done");
      order.ended(published);
    }
    add(plan.recordNode, "record_node");
    std::cout << (steps.empty() ? "-" : steps) << '\n';
  }
  return 0;
}
