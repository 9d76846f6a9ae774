// How each NCCL collective maps onto the packet exchange (see algorithms/exchange.h): which range
// each rank sends to which peer, and where received ranges land. In-place calls need nothing special
// here: the exchange reads every word before it overwrites it.
#pragma once

#include <cstddef>

#include "native/algorithms/exchange.h"
#include "native/common/data_type.h"

namespace mscclpp_nccl {

// Every rank's `count` elements land at recv + rank * count on every rank.
ExchangeArgs planAllGather(const void* send, void* recv, size_t count, DataType type);
// Rank r receives the reduction of range r (recvCount elements) of every rank's send buffer.
ExchangeArgs planReduceScatter(const void* send, void* recv, size_t recvCount, DataType type, ReduceOp op);
// Range p of rank r's send buffer lands in range r of rank p's receive buffer.
ExchangeArgs planAlltoAll(const void* send, void* recv, size_t count, DataType type);
ExchangeArgs planBroadcast(int rank, const void* send, void* recv, size_t count, DataType type, int root);
ExchangeArgs planReduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                        int root);
ExchangeArgs planGather(int rank, const void* send, void* recv, size_t count, DataType type, int root);
ExchangeArgs planScatter(int rank, const void* send, void* recv, size_t count, DataType type, int root);

}  // namespace mscclpp_nccl
