// Stands in for shim/enqueue.h in CPU drivers that build shim/group.cc without the communicator (put
// first on the quoted-include path with -iquote tests/stubs): no stream work runs there, and none is modeled.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "shim/api.h"
#include "shim/group.h"

template <typename Body>
ncclResult_t runInOrder(ncclComm*, const cudaStream_t*, size_t, Body) {
  return ncclInternalError;
}

template <typename Model>
double modeledOn(ncclComm*, const Model&) {
  return 0.0;
}
