#include "native/collective_plans.h"

namespace mscclpp_nccl {
namespace {

// `recvStride` 1: each sender's range lands in its own range of the destination; 0: all in one.
ExchangeArgs plan(Collective collective, int rank, int root, const void* send, void* recv, size_t recvStride,
                  size_t count, DataType type) {
  const ExchangeFlow flow = exchangeFlow(collective, rank == root);
  ExchangeArgs args{};
  const size_t bytes = count * dataTypeSize(type);
  args.src = send;
  args.srcStride = flow.oneRange ? 0 : bytes;
  args.dst = recv;
  args.dstStride = recvStride * bytes;
  args.rangeBytes = bytes;
  args.sendTo = flow.sendTo;
  args.recvFrom = flow.recvFrom;
  args.root = root;
  args.type = type;
  args.op = ReduceOp{BinaryOp::kSum, {}};
  args.op.scaling.postDivisor = 1;
  args.collective = collective;
  return args;
}

ExchangeArgs reducing(ExchangeArgs args, ReduceOp op) {
  args.reduce = true;
  args.op = op;
  return args;
}

}  // namespace

// Collectives without a root take rank 0 as theirs: their flow does not depend on it.
ExchangeArgs planAllGather(const void* send, void* recv, size_t count, DataType type) {
  return plan(Collective::kAllGather, 0, 0, send, recv, 1, count, type);
}

ExchangeArgs planReduceScatter(const void* send, void* recv, size_t recvCount, DataType type, ReduceOp op) {
  return reducing(plan(Collective::kReduceScatter, 0, 0, send, recv, 0, recvCount, type), op);
}

ExchangeArgs planAlltoAll(const void* send, void* recv, size_t count, DataType type) {
  return plan(Collective::kAlltoAll, 0, 0, send, recv, 1, count, type);
}

ExchangeArgs planBroadcast(int rank, const void* send, void* recv, size_t count, DataType type, int root) {
  return plan(Collective::kBroadcast, rank, root, send, recv, 0, count, type);
}

ExchangeArgs planReduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                        int root) {
  return reducing(plan(Collective::kReduce, rank, root, send, recv, 0, count, type), op);
}

ExchangeArgs planGather(int rank, const void* send, void* recv, size_t count, DataType type, int root) {
  return plan(Collective::kGather, rank, root, send, recv, 1, count, type);
}

ExchangeArgs planScatter(int rank, const void* send, void* recv, size_t count, DataType type, int root) {
  return plan(Collective::kScatter, rank, root, send, recv, 0, count, type);
}

}  // namespace mscclpp_nccl
