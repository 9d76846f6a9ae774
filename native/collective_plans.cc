#include "native/collective_plans.h"

namespace mscclpp_nccl {
namespace {

ExchangeArgs plan(const void* send, size_t sendStride, void* recv, size_t recvStride, size_t count,
                  DataType type, PeerSet sendTo, PeerSet recvFrom, int root) {
  ExchangeArgs args{};
  const size_t bytes = count * dataTypeSize(type);
  args.src = send;
  args.srcStride = sendStride * bytes;
  args.dst = recv;
  args.dstStride = recvStride * bytes;
  args.rangeBytes = bytes;
  args.sendTo = sendTo;
  args.recvFrom = recvFrom;
  args.root = root;
  args.type = type;
  args.op = ReduceOp{BinaryOp::kSum, {}};
  args.op.scaling.postDivisor = 1;
  return args;
}

}  // namespace

ExchangeArgs planAllGather(const void* send, void* recv, size_t count, DataType type) {
  return plan(send, 0, recv, 1, count, type, PeerSet::kAll, PeerSet::kAll, 0);
}

ExchangeArgs planReduceScatter(const void* send, void* recv, size_t recvCount, DataType type, ReduceOp op) {
  ExchangeArgs args = plan(send, 1, recv, 0, recvCount, type, PeerSet::kAll, PeerSet::kAll, 0);
  args.reduce = true;
  args.op = op;
  return args;
}

ExchangeArgs planAlltoAll(const void* send, void* recv, size_t count, DataType type) {
  return plan(send, 1, recv, 1, count, type, PeerSet::kAll, PeerSet::kAll, 0);
}

ExchangeArgs planBroadcast(int rank, const void* send, void* recv, size_t count, DataType type, int root) {
  return plan(send, 0, recv, 0, count, type, rank == root ? PeerSet::kAll : PeerSet::kNone, PeerSet::kRoot,
              root);
}

ExchangeArgs planReduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                        int root) {
  ExchangeArgs args = plan(send, 0, recv, 0, count, type, rank == root ? PeerSet::kNone : PeerSet::kRoot,
                           rank == root ? PeerSet::kAll : PeerSet::kNone, root);
  args.reduce = true;
  args.op = op;
  return args;
}

ExchangeArgs planGather(int rank, const void* send, void* recv, size_t count, DataType type, int root) {
  return plan(send, 0, recv, 1, count, type, PeerSet::kRoot, rank == root ? PeerSet::kAll : PeerSet::kNone,
              root);
}

ExchangeArgs planScatter(int rank, const void* send, void* recv, size_t count, DataType type, int root) {
  return plan(send, 1, recv, 0, count, type, rank == root ? PeerSet::kAll : PeerSet::kNone, PeerSet::kRoot,
              root);
}

}  // namespace mscclpp_nccl
