#include "native/algorithms/run_plan.h"

#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

// "ready": this rank's buffers are mapped by every peer (zero-copy runs if every rank's are).
void logPlan(Collective collective, DataType type, const CallPlan& plan, const MappedCall* mapped,
             bool inWindows) {
  if (plan.mapped)
    MSCCLPP_INFO(kTuning, "%s %zu bytes %s: zero-copy (%s), %d blocks x %d threads; else %s (%s)",
                 collectiveName(collective), plan.bytes, dataTypeName(type),
                 inWindows                                  ? "in windows"
                 : mapped->send.ready && mapped->recv.ready ? "mapped, ready"
                                                            : "mapped, not ready",
                 plan.shape.blocks, plan.shape.threads, plan.algorithm->name, plan.source);
  else
    MSCCLPP_INFO(kTuning, "%s %zu bytes %s: %s (%s), %d blocks x %d threads, %zu-byte chunks",
                 collectiveName(collective), plan.bytes, dataTypeName(type), plan.algorithm->name,
                 plan.source, plan.shape.blocks, plan.shape.threads, plan.shape.chunkBytes);
}

}  // namespace

Status runAllReduce(const Transports& transports, const CallPlan& plan, const AllReduceArgs& args,
                    const DirectBuffers* windows, const MappedCall* mapped, cudaStream_t stream,
                    uint64_t* published) {
  *published = 0;
  logPlan(Collective::kAllReduce, args.type, plan, mapped, false);
  if (plan.mapped)
    return launchAllReduceMapped(transports.direct, transports.chunks, args, *mapped, plan.shape,
                                 plan.scratch, stream);
  MSCCLPP_TRY(plan.algorithm->launchAllReduce(transports, args, plan.shape, windows, stream));
  if (plan.algorithm->publishesTicket) *published = args.ticket;
  return Status::kSuccess;
}

Status runExchange(const Transports& transports, const CallPlan& plan, const ExchangeArgs& args,
                   const MappedCall* mapped, const DirectBuffers* windows, cudaStream_t stream,
                   uint64_t* published) {
  *published = 0;
  logPlan(args.collective, args.type, plan, mapped, windows != nullptr);
  if (plan.mapped)
    return launchExchangeMapped(transports.direct, transports.chunks, args, *mapped, windows, plan.shape,
                                plan.scratch, stream);
  MSCCLPP_TRY(plan.algorithm->launchExchange(transports, args, plan.shape, stream));
  if (plan.algorithm->publishesTicket) *published = args.ticket;
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
