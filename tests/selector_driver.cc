// Test driver for the algorithm selector (tests/test_selector.py builds it with g++ and the CUDA headers;
// no GPU is used).
//
//   selector_driver GPU_NAME[@ARCH] NRANKS RANKS_PER_GPU RESIDENT_BLOCKS CHUNK_SLOT_BYTES SLOT_PACKETS
//     (ARCH: the GPU's architecture, as "sm_90"; unknown where left out.)
//     Sets a selector up as a communicator would (MSCCLPP_NCCL_ALGO and MSCCLPP_NCCL_TUNING_FILE come from
//     the environment), then answers choices read from stdin, one per line: "collective elementBytes
//     bytes [registered]" (registered: 1 when the buffers lie in mapped windows), with "algorithm blocks
//     threads chunkBytes source early" (early: 1 when the kernel launches early, as on sm_90).
//     "sendrecv-plan RANK BYTES" plans rank RANK's group of a send of BYTES to every other rank and a
//     receive from each, as runSendRecv launches it: one line per non-empty kernel, "packet|chunked K"
//     (K counts the kernels launched) and its transfers as "s|r PEER" words; "ticket K" where kernel K
//     was given the call's ticket (7), "offered N" where N sends were offered for their receivers to pull
//     (the communicator maps buffers), and "published T" (0: the call's end is not a ticket).
//     "grid N" makes N the largest grid from then on, as a split does to its parent (answers
//     "grid 0 0 0 set 0", a row of the usual six fields).
//     "maps COLLECTIVE ELEMENT_BYTES BYTES PREMUL" answers "maps 1|0": whether a call outside windows
//     takes the mapped zero-copy path (the communicator shares allocations, as by default).
//     "mapped-fallback COLLECTIVE ELEMENT_BYTES BYTES" answers a choice row: the chunked schedule a mapped
//     call runs where some rank's buffers are not mapped yet.
//     "mapped-shape BYTES SCRATCH_BLOCKS SCRATCH_THREADS" answers "mapped-shape BLOCKS THREADS EARLY": the
//     grid of a mapped kernel moving BYTES whose fallback is a chunked grid of that shape.
//     "plan COLLECTIVE ELEMENT_BYTES BYTES IN_WINDOWS PREMUL" answers "plan MAPPED SCRATCH_BLOCKS" and a
//     choice row: the one plan a call gets (AlgorithmSelector::plan).
//     "model COLLECTIVE ELEMENT_BYTES BYTES" answers "model MICROSECONDS PATH" (PATH 0 packet, 1 chunked,
//     2 mapped): the time ncclGroupSimulateEnd reports for the call (native/algorithms/cost_model.h),
//     BYTES as in a choice; sendrecv: a send of BYTES and a receive of BYTES in one group.
//     "registry" answers a line "NAME SERVES_ALL_REDUCE SERVES_AN_EXCHANGE HAS_ALL_REDUCE_LAUNCH
//     HAS_EXCHANGE_LAUNCH PUBLISHES PROTOCOL" per algorithm, then "end".
//     "mapped-flow COLLECTIVE RANK ROOT [IN_PLACE]" answers "mapped-flow SPREAD PUSH READS WRITES WINDOWS"
//     (each 0 or 1): how the zero-copy exchange moves rank RANK's call as native/collective_plans.h plans
//     it, whether its peers read its source and write into its destination (exchange.h: mappedFlow), and
//     whether in symmetric windows it may skip posting its buffers (exchangeMayUseWindows). IN_PLACE 1:
//     both buffers start at one address.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "native/algorithms/algorithm_selector.h"
#include "native/algorithms/cost_model.h"
#include "native/algorithms/send_recv.h"
#include "native/collective_plans.h"

namespace mscclpp_nccl {

// The kernels are not linked here; the registry refers to them, and nothing here may reach these.
// The send/recv launchers record the transfers of each kernel instead, for sendrecv-plan queries.
namespace {
Status notLinked() { return Status::kInternalError; }
int launchedKernels = 0;
// Counts the sends runSendRecv offers for their receivers to pull; none is ready.
struct CountedSources final : SendSources {
  MappedBuffer describe(const P2pOp&) override {
    ++offered;
    return MappedBuffer{};
  }
  int offered = 0;
};
Status recordKernel(const char* path, const std::vector<P2pOp>& ops) {
  const int kernel = launchedKernels++;
  if (ops.empty()) return Status::kSuccess;
  printf("%s %d", path, kernel);
  for (const P2pOp& op : ops) printf(" %s %d", op.isSend ? "s" : "r", op.peer);
  printf("\n");
  return Status::kSuccess;
}
}  // namespace
Status launchAllReduceOneShotPacket(const PacketComm&, const AllReduceArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchAllReduceTwoShotPacket(const PacketComm&, const AllReduceArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchAllReduceTwoShotChunked(const ChunkComm&, const AllReduceArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchAllReduceZeroCopy(const ZeroCopyComm&, const AllReduceArgs&, const PeerBuffers&,
                               const PeerBuffers&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchAllReduceMapped(const ZeroCopyComm&, const ChunkComm&, const AllReduceArgs&, const MappedCall&,
                             LaunchShape, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchExchangeMapped(const ZeroCopyComm&, const ChunkComm&, const ExchangeArgs&, const MappedCall&,
                            const DirectBuffers*, LaunchShape, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchP2p(const P2pComm&, const std::vector<P2pOp>& ops, int, int, uint64_t ticket, cudaStream_t) {
  if (ticket != 0) printf("ticket %d\n", launchedKernels);
  return recordKernel("packet", ops);
}
Status launchP2pChunked(const ChunkComm&, const MappedRegion*, const std::vector<P2pOp>& ops, int, int,
                        cudaStream_t) {
  return recordKernel("chunked", ops);
}
Status launchExchange(const PacketComm&, const ExchangeArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchReduceTwoShotPacket(const PacketComm&, const ExchangeArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}
Status launchExchangeChunked(const ChunkComm&, const ExchangeArgs&, LaunchShape, cudaStream_t) {
  return notLinked();
}

}  // namespace mscclpp_nccl

// A choice row: "algorithm blocks threads chunkBytes source early".
void printChoice(const mscclpp_nccl::Choice& choice) {
  printf("%s %d %d %zu %s %d\n", choice.algorithm->name, choice.shape.blocks, choice.shape.threads,
         choice.shape.chunkBytes, choice.source, choice.shape.earlyLaunch ? 1 : 0);
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr,
            "usage: %s GPU_NAME[@ARCH] NRANKS RANKS_PER_GPU RESIDENT_BLOCKS CHUNK_SLOT_BYTES SLOT_PACKETS\n",
            argv[0]);
    return 2;
  }
  const std::string gpu = argv[1];
  const size_t at = gpu.rfind('@');
  mscclpp_nccl::AlgorithmSelector selector;
  selector.init(gpu.substr(0, at), at == std::string::npos ? "" : gpu.substr(at + 1), atoi(argv[2]),
                atoi(argv[3]), atoi(argv[4]));
  selector.setChunkSlotBytes(strtoull(argv[5], nullptr, 10));
  selector.setSlotPackets(strtoull(argv[6], nullptr, 10));
  selector.setEarlyLaunch(true);
  selector.setParkedBlocksHeld(true);
  selector.setMapsBuffers(true);
  const int nranks = atoi(argv[2]);
  const mscclpp_nccl::CostModel costModel(argv[1], nranks, atoi(argv[3]), 1);
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string name;
    if (line.rfind("sendrecv-plan ", 0) == 0) {
      int rank = -1;
      size_t bytes = 0;
      words >> name >> rank >> bytes;
      mscclpp_nccl::Transports transports{};
      static char scratch;  // chunk channels exist: chunked transfers are possible
      transports.p2p.packets.rank = transports.p2pChunks.rank = rank;
      transports.p2p.packets.nranks = transports.p2pChunks.nranks = nranks;
      transports.p2pChunks.localScratch = &scratch;
      static mscclpp_nccl::MappedRegion mappedTable;  // the communicator maps buffers
      transports.direct.mappedTable = &mappedTable;
      std::vector<mscclpp_nccl::P2pOp> ops;
      for (int peer = 0; peer < nranks; ++peer) {
        if (peer == rank) continue;
        ops.push_back({true, peer, nullptr, bytes, 2});
        ops.push_back({false, peer, nullptr, bytes, 2});
      }
      mscclpp_nccl::launchedKernels = 0;
      uint64_t published = 0;
      mscclpp_nccl::CountedSources sources;
      if (mscclpp_nccl::runSendRecv(transports, selector, ops, 7, nullptr, &sources, &published) !=
          mscclpp_nccl::Status::kSuccess)
        printf("PLAN FAILED\n");
      printf("offered %d\npublished %llu\nend\n", sources.offered,
             static_cast<unsigned long long>(published));
      continue;
    }
    size_t elementBytes = 0, bytes = 0;
    mscclpp_nccl::Collective collective;
    if (line.rfind("parked ", 0) == 0) {
      int held = 1;
      words >> name >> held;
      selector.setParkedBlocksHeld(held != 0);
      printf("parked 0 0 0 set 0\n");
      continue;
    }
    if (line.rfind("grid ", 0) == 0) {
      int blocks = 1;
      words >> name >> blocks;
      selector.setResidentBlocks(blocks);
      printf("grid 0 0 0 set 0\n");
      continue;
    }
    if (line.rfind("mapped-flow ", 0) == 0) {
      int rank = 0, root = 0, inPlace = 0;
      words >> name >> name >> rank >> root >> inPlace;
      static char source[64], separate[64];
      char* destination = inPlace ? source : separate;
      const mscclpp_nccl::DataType type = mscclpp_nccl::DataType::kBfloat16;
      const mscclpp_nccl::ReduceOp sum{};
      mscclpp_nccl::ExchangeArgs args{};
      if (name == "all_gather")
        args = mscclpp_nccl::planAllGather(source, destination, 4, type);
      else if (name == "reduce_scatter")
        args = mscclpp_nccl::planReduceScatter(source, destination, 4, type, sum);
      else if (name == "alltoall")
        args = mscclpp_nccl::planAlltoAll(source, destination, 4, type);
      else if (name == "broadcast")
        args = mscclpp_nccl::planBroadcast(rank, source, destination, 4, type, root);
      else if (name == "reduce")
        args = mscclpp_nccl::planReduce(rank, source, destination, 4, type, sum, root);
      else if (name == "gather")
        args = mscclpp_nccl::planGather(rank, source, destination, 4, type, root);
      else if (name == "scatter")
        args = mscclpp_nccl::planScatter(rank, source, destination, 4, type, root);
      else {
        printf("BAD QUERY %s\n", line.c_str());
        continue;
      }
      mscclpp_nccl::collectiveFromName(name, &args.collective);  // as Communicator::exchange sets it
      const mscclpp_nccl::MappedFlow flow = mscclpp_nccl::mappedFlow(args);
      const size_t srcBytes = args.srcStride * (nranks - 1) + args.rangeBytes;  // as the communicator does
      const size_t dstBytes = args.dstStride * (nranks - 1) + args.rangeBytes;
      printf("mapped-flow %d %d %d %d %d\n", flow.spread, flow.push,
             mscclpp_nccl::peersReadSource(args, rank), mscclpp_nccl::peersWriteDestination(args, rank),
             mscclpp_nccl::exchangeMayUseWindows(args, srcBytes, dstBytes));
      continue;
    }
    if (line.rfind("mapped-shape ", 0) == 0) {
      mscclpp_nccl::LaunchShape scratch{};
      words >> name >> bytes >> scratch.blocks >> scratch.threads;
      const mscclpp_nccl::LaunchShape shape = selector.mappedShape(bytes, scratch);
      printf("mapped-shape %d %d %d\n", shape.blocks, shape.threads, shape.earlyLaunch ? 1 : 0);
      continue;
    }
    if (line.rfind("mapped-fallback ", 0) == 0) {
      words >> name >> name >> elementBytes >> bytes;
      if (!mscclpp_nccl::collectiveFromName(name, &collective)) {
        printf("BAD QUERY %s\n", line.c_str());
        continue;
      }
      printChoice(selector.mappedFallback(collective, elementBytes, bytes));
      continue;
    }
    if (line == "registry") {
      for (const mscclpp_nccl::Algorithm& a : mscclpp_nccl::algorithms())
        printf("%s %d %d %d %d %d %d\n", a.name, a.serves(mscclpp_nccl::Collective::kAllReduce),
               (a.collectives & ~1u & ~(1u << static_cast<int>(mscclpp_nccl::Collective::kSendRecv))) != 0,
               a.launchAllReduce != nullptr, a.launchExchange != nullptr, a.publishesTicket,
               static_cast<int>(a.protocol));
      printf("end\n");
      continue;
    }
    if (line.rfind("plan ", 0) == 0) {
      int inWindows = 0, preMultiply = 0;
      words >> name >> name >> elementBytes >> bytes >> inWindows >> preMultiply;
      if (!mscclpp_nccl::collectiveFromName(name, &collective)) {
        printf("BAD QUERY %s\n", line.c_str());
        continue;
      }
      const mscclpp_nccl::CallPlan plan =
          selector.plan({collective, elementBytes, bytes, inWindows != 0, preMultiply != 0});
      printf("plan %d %d %zu ", plan.mapped ? 1 : 0, plan.scratch.blocks, plan.bytes);
      printChoice({plan.algorithm, plan.shape, plan.source});
      continue;
    }
    if (line.rfind("model ", 0) == 0) {
      words >> name >> name >> elementBytes >> bytes;
      if (!mscclpp_nccl::collectiveFromName(name, &collective)) {
        printf("BAD QUERY %s\n", line.c_str());
        continue;
      }
      const mscclpp_nccl::CostPath path = selector.costPath({collective, elementBytes, bytes, false, false});
      const double us = collective == mscclpp_nccl::Collective::kSendRecv
                            ? costModel.transfersMicroseconds(bytes, bytes, path)
                            : costModel.collectiveMicroseconds(collective, bytes, path);
      printf("model %.3f %d\n", us, static_cast<int>(path));
      continue;
    }
    if (line.rfind("maps ", 0) == 0) {
      int preMultiply = 0;
      words >> name >> name >> elementBytes >> bytes >> preMultiply;
      if (!mscclpp_nccl::collectiveFromName(name, &collective)) {
        printf("BAD QUERY %s\n", line.c_str());
        continue;
      }
      printf("maps %d\n", selector.mapsBuffers(collective, bytes, preMultiply != 0) ? 1 : 0);
      continue;
    }
    if (!(words >> name >> elementBytes >> bytes) || !mscclpp_nccl::collectiveFromName(name, &collective)) {
      printf("BAD QUERY %s\n", line.c_str());
      continue;
    }
    int registered = 0;
    words >> registered;
    printChoice(selector.choose(collective, elementBytes, bytes, registered != 0));
  }
  return 0;
}
