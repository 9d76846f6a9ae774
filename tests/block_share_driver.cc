// Test driver for native/transport/block_share.cc (tests/test_block_share.py builds it with g++; no GPU).
// Plays one process's communicators on device 0 from stdin, one command a line:
//   "new SM RANKS_ON_GPU RANKS_OF_PROCESS"  a communicator is created: answers "new ID GRID" (its proposal)
//   "settle ID GRID"                         the ranks agreed on GRID: answers "settle ID GRID"
//   "halve ID"                               ID is split: answers "halve ID GRID" (the grid it keeps)
//   "free ID"                                ID is destroyed: answers "free ID"
//   "held"                                   answers "held HELD CAPACITY" for the device
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "native/transport/block_share.h"

int main() {
  std::map<int, std::unique_ptr<mscclpp_nccl::BlockShare>> comms;
  int nextId = 0;
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string command;
    words >> command;
    if (command == "new") {
      int sm = 0, ranksOnGpu = 0, ranksOfProcess = 0;
      words >> sm >> ranksOnGpu >> ranksOfProcess;
      auto share = std::make_unique<mscclpp_nccl::BlockShare>(0, sm, ranksOnGpu, ranksOfProcess);
      printf("new %d %d\n", nextId, share->proposed());
      comms[nextId++] = std::move(share);
    } else if (command == "settle") {
      int id = 0, grid = 0;
      words >> id >> grid;
      comms.at(id)->settle(grid);
      printf("settle %d %d\n", id, comms.at(id)->grid());
    } else if (command == "halve") {
      int id = 0;
      words >> id;
      printf("halve %d %d\n", id, comms.at(id)->halve());
    } else if (command == "free") {
      int id = 0;
      words >> id;
      comms.erase(id);
      printf("free %d\n", id);
    } else if (command == "held") {
      printf("held %d %d\n", mscclpp_nccl::BlockShare::heldOn(0), mscclpp_nccl::BlockShare::capacityOn(0));
    } else {
      fprintf(stderr, "unknown command: %s\n", line.c_str());
      return 2;
    }
    fflush(stdout);
  }
  return 0;
}
