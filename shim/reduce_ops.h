// Translation of ncclRedOp_t (built-in or PreMulSum handle) into the native ReduceOp.
#pragma once

#include "native/common/data_type.h"
#include "shim/comm_handle.h"

// Resolves `op` for a reduction of `type` on `comm`, capturing a PreMulSum scalar (its value, or the
// device pointer) now, so the op may be destroyed before the work runs.
ncclResult_t resolveReduceOp(ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* function,
                             mscclpp_nccl::ReduceOp* out);
