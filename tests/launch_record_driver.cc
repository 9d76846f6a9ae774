// Test driver for native/algorithms/launch_record.cc (tests/test_launch_record.py builds it with g++).
// Reads launches from stdin, one per line: "STREAM CAPTURE EARLY" (a stream number, a capture id, 0 when
// not capturing, and 1 when the grid is launched early), and answers each with 1 where the launch may
// carry the early-launch attribute, else 0.
#include <cstdint>
#include <cstdio>
#include <iostream>

#include "native/algorithms/launch_record.h"

int main() {
  mscclpp_nccl::LaunchRecord record;
  uintptr_t stream = 0;
  unsigned long long capture = 0;
  int early = 0;
  while (std::cin >> stream >> capture >> early)
    printf("%d\n", record.mayCarry(reinterpret_cast<const void*>(stream), capture, early != 0) ? 1 : 0);
  return 0;
}
