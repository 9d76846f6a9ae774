#include "shim/enqueue.h"

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;
