// A communicator of the native runtime: bootstrap, topology, peer scratch buffers and the device
// state its kernels share. The shim wraps one of these in every ncclComm_t.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "native/algorithms/algorithm_selector.h"
#include "native/algorithms/allreduce.h"
#include "native/algorithms/cost_model.h"
#include "native/algorithms/exchange.h"
#include "native/algorithms/one_sided.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/transports.h"
#include "native/bootstrap/abort_link.h"
#include "native/bootstrap/bootstrap.h"
#include "native/collective_comm.h"
#include "native/common/status.h"
#include "native/fallback/hierarchy.h"
#include "native/stall_monitor.h"
#include "native/stream_order.h"
#include "native/transport/block_share.h"
#include "native/transport/mapped_allocations.h"
#include "native/transport/peer_buffer.h"
#include "native/transport/rank_info.h"
#include "native/transport/symmetric_window.h"

namespace mscclpp_nccl {

constexpr int kSplitNoColor = -1;

class RoutedComm;

// kDecide: the path follows the hosts and MSCCLPP_NCCL_FALLBACK (native/fallback/hierarchy.h). The
// intra-host communicator of a hierarchical one is kNativeOnly, so that it never decides again.
enum class PathPolicy { kDecide, kNativeOnly };

// What a new communicator is for. An intra-host one (kNativeOnly) shares its GPUs with the parent's
// other ranks and with stock's kernels, which its own do not see in its rank table.
struct CommRole {
  PathPolicy policy = PathPolicy::kDecide;
  int parentRanksPerGpu = 1;  // the most ranks of the parent on one GPU
  int maxCtas = 0;            // ncclConfig_t maxCTAs: no kernel takes more blocks (0: unset)
};

class Communicator final : public CollectiveComm {
 public:
  // Collective over all `nranks` ranks: joins the rendezvous named by `id` and connects to the peers.
  // Uses the calling thread's current CUDA device. Raising `link` makes the setup give up promptly.
  static Status create(const UniqueId& id, int rank, int nranks, std::unique_ptr<Communicator>* out,
                       AbortLink* link = nullptr, CommRole role = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const override { return rank_; }
  // NCCL's commHash: what NCCL_DEBUG=INFO and the stall reports name the communicator by.
  uint64_t commHash() const { return commHash_; }
  int size() const { return nranks_; }
  int cudaDevice() const { return device_; }
  int ranksOnMyGpu() const { return topology_.ranksOnMyGpu; }
  // Device memory this communicator holds (ncclCommMemStats): all of it, and the part suspend() frees.
  size_t deviceBytes() const override;
  size_t releasableBytes() const;

  // ncclCommSuspend with NCCL_SUSPEND_MEM: collective. Waits for this communicator's work to leave the
  // GPU, then frees its peer-mapped scratch on every rank (a peer's mapping keeps an owner's memory, so
  // all ranks take part); counters, flags and tables stay. The shim accepts no call but resume, queries,
  // destroy and abort until resume(). Refused once a call was captured in a CUDA graph, whose replays
  // would use the freed scratch, and on a communicator routed through stock NCCL.
  Status suspend();
  // ncclCommResume: collective. New scratch, mapped with every peer, and the counters restarted with it
  // on every rank alike.
  Status resume();
  bool suspended() const { return suspended_; }

  // ncclCommWindowRegister: collective. `symmetric` is the caller's NCCL_WIN_COLL_SYMMETRIC promise;
  // with it, collectives whose buffers all lie in mapped windows go zero-copy. *out stays valid until
  // deregisterWindow.
  Status registerWindow(void* buffer, size_t bytes, bool symmetric, SymmetricWindow** out);
  // Local: waits until this rank's kernels are done (the last ones that touched peers' windows, and,
  // through their final barriers, every peer's access to this one), then unmaps the peers' windows.
  Status deregisterWindow(SymmetricWindow* window);
  // NCCL's load/store (LSA) team of this rank's windows: every rank on one host; over several hosts, this
  // host's ranks, in the order of the intra-host communicator that holds the windows, where every host
  // holds as many, consecutively numbered (as NCCL's teams are), else this rank alone. The team rank of
  // world rank `rank`, or -1 where it is not in the team; and the team's size.
  int loadStoreRank(int rank) const;
  int loadStoreSize() const;

  // ncclCommRegister / ncclCommDeregister: local. A registered buffer's allocation is exported to the
  // peers now, so that collectives on it go zero-copy from their first call, and is held until
  // unregistered, when every peer closes its mapping. Buffers that cannot be shared stay a hint.
  void registerBuffer(const void* buffer, size_t bytes);
  void unregisterBuffer(const void* buffer, size_t bytes);

  // Brackets one call's work (a collective, or a whole group's) so that it runs after this
  // communicator's previous call and before its next one, whatever streams they use: the work is
  // issued on streams[0] between the two, and streams[1..count) join it (see native/stream_order.h).
  Status beginCall(const cudaStream_t* streams, size_t count) { return order_.begin(streams, count); }
  Status endCall(const cudaStream_t* streams, size_t count) { return order_.end(streams, count); }

  // Collectives and point-to-point transfers. Each enqueues on `stream` and never synchronizes the
  // host; empty calls enqueue nothing (every rank of a collective sees the same count).
  Status allReduce(const AllReduceArgs& args, cudaStream_t stream) override;
  Status exchange(const ExchangeArgs& args, cudaStream_t stream) override;  // args.collective: which one
  // One group's sends and receives; at most one per peer and direction (see splitP2pPasses).
  Status sendRecv(const std::vector<P2pOp>& ops, cudaStream_t stream);

  // One-sided operations (native/algorithms/one_sided.h), eager only, as in NCCL. ncclPutSignal: `bytes`
  // from `src` into `peer`'s `window` at `offset`, then a signal to `peer`; ncclSignal; ncclWaitSignal:
  // `counts[r]` more signals from each rank r.
  Status putSignal(const void* src, size_t bytes, int peer, const SymmetricWindow& window, size_t offset,
                   cudaStream_t stream);
  Status signal(int peer, cudaStream_t stream);
  Status waitSignals(const std::vector<uint64_t>& counts, cudaStream_t stream);

  // What each call would take, in microseconds, on the path its plan takes (native/algorithms/cost_model.h):
  // ncclGroupSimulateEnd's estimate. Nothing is launched.
  double modeledMicroseconds(const AllReduceArgs& args) const;
  double modeledMicroseconds(const ExchangeArgs& args) const;
  double modeledMicroseconds(const std::vector<P2pOp>& ops) const;

  // kRemoteError naming the rank when a peer was lost (its process died, or it aborted), else the
  // first failure any kernel of this communicator reported (timeout, abort), else kSuccess.
  Status asyncError() const override;
  // Makes every waiting kernel and bootstrap call of this communicator give up promptly.
  void abort() override;
  // Makes our waiting kernels give up, keeping the bootstrap; makes no CUDA call (the peer-loss handler
  // runs it on the bootstrap's receiver thread).
  void stopKernels() override;
  // ncclCommShrink with NCCL_SHRINK_ABORT, on a thread that may call CUDA: every outstanding operation
  // gives up, stock's included, and the bootstrap that the shrink goes through is kept.
  void abortOutstandingWork();

  // ncclCommRevoke: every call issued so far gives up (its kernels leave without finishing, its outputs
  // undefined), and revokedWorkEnded() says when all of them have left the GPU. The bootstrap stays, so
  // that split, shrink and destroy work on; the shim accepts no other call. Local, as in NCCL: peers
  // whose calls wait for this rank revoke (or abort) theirs too. On the communicator's device, as calls.
  Status revoke();
  bool revokedWorkEnded() const { return order_.issuedWorkEnded(); }

  // ncclCommSplit: collective over this communicator. Ranks with `color` == kSplitNoColor get null.
  // `maxCtas`: the child's ncclConfig_t maxCTAs (0: unset).
  Status split(int color, int key, int maxCtas, std::unique_ptr<Communicator>* out);
  // ncclCommShrink: collective over the ranks not in `excluded`, which need not take part.
  Status shrink(const std::vector<int>& excluded, int maxCtas, std::unique_ptr<Communicator>* out);
  // ncclCommGrow's id, collective over this communicator: the root passes the id of its
  // ncclCommGetUniqueId, the others null (or the same id); every rank gets it in *out.
  Status shareGrowId(const UniqueId* mine, UniqueId* out);

 private:
  // The regions of the peer-mapped scratch. Past kMaxChunkRanks ranks there are no chunk regions, past
  // kMaxZeroCopyRanks no sync region.
  enum ScratchRegion : int {
    kPacketRegion,     // packet slots of the collectives
    kChunkRegion,      // chunk slots and semaphores of the collectives
    kP2pPacketRegion,  // packet slots of send/recv
    kP2pAckRegion,     // send/recv acknowledgements
    kP2pChunkRegion,   // chunk channels of large send/recv transfers
    kSyncRegion,       // zero-copy barrier flags, then the one-sided signal counters
    kRegionCount
  };
  // What every rank of a native communicator agrees on before it lays out its transports.
  struct NativeLayout {
    size_t slotPackets = 0;     // packets per scratch slot
    size_t chunkSlotBytes = 0;  // bytes per chunk slot (0: no chunk channels)
    int chunkBlocks = 0;        // chunk channels per pair of ranks
    bool mapsBuffers = false;   // zero-copy on buffers outside windows (every rank allows it)
  };
  // Where each kernel family's counters lie, in words of the one allocation of device counters.
  struct CounterLayout {
    CounterLayout(int nranks, int chunkBlocks);
    size_t steps = 0, blocksDone = 0;  // collective packet steps per block; blocks done
    size_t p2pSend = 0, p2pRecv = 0;   // p2p packet steps per peer and block
    size_t chunks = 0, calls = 0,
           p2pChunks = 0;  // collective chunk channels, zero-copy calls per block, p2p chunk channels
    size_t stopped = 0, ticket = 0;  // the stop word, the call ticket
    size_t words = 0;                // all of them
  };

  Communicator() = default;
  // Setup in named steps: the path (native or routed), the layout all ranks agree on, the peer-mapped
  // scratch, then the transports over it.
  Status connect(std::unique_ptr<Bootstrap> bootstrap, CommRole role);
  Status decidePath(HostLayout* hosts, CommPath* path);
  Status agreeOnLayout(CommRole role, NativeLayout* layout);
  Status createScratch(const NativeLayout& layout);
  Status createTransports(const NativeLayout& layout);
  // Points the transports at the scratch (at connect, and again at resume).
  Status bindScratch(const NativeLayout& layout);
  void releaseScratch();
  // The rest of connect() for a communicator that is not native (native/fallback/DESIGN.md): its
  // intra-host communicator and stock ones (native/routed_communicator.h) instead of our transport.
  Status connectRouted(const HostLayout& layout, CommPath path, int maxCtas);
  Status joinNewCommunicator(const std::vector<int>& members, std::unique_ptr<Communicator>* out,
                             CommRole role = {});
  // Gives the call about to be launched its number on this communicator, which its kernels' stall
  // reports carry (native/stall_monitor.h).
  void numberCall(Collective collective, size_t bytes);
  void numberCall(const char* what, size_t bytes);
  // How a call of this shape moves its bytes, for modeledMicroseconds.
  CostPath modeledPath(const CallShape& call) const;
  // Why a one-sided operation named `what` cannot run now (kSuccess: it can).
  Status oneSidedRefusal(const char* what) const;
  // On the bootstrap's receiver thread (no CUDA calls): records the rank and stops the kernels.
  void onPeerLost(int peer);
  // Both buffers on every rank, when each (its first sendBytes / recvBytes) lies in a mapped window here
  // (then, by the windows' promise, at the same offset on every rank).
  bool findDirectBuffers(const void* send, size_t sendBytes, const void* recv, size_t recvBytes,
                         DirectBuffers* out) const;
  // This rank's description of a call's buffers for the mapped zero-copy kernels: `send` (null: peers
  // read nothing of it) and `recv` (null: peers write nothing of it). Sets *capturing when the call
  // is being captured (as beginCall found it).
  MappedCall describeBuffers(const void* send, size_t sendBytes, const void* recv, size_t recvBytes,
                             uint64_t ticket, bool* capturing);
  // Chunk channels, `blocks` per pair, over scratch region `region` (absent: none), their counters at
  // `counters` ([sent][received]).
  ChunkComm chunkComm(int blocks, size_t slotBytes, int region, uint64_t* counters,
                      const WaitControl& wait) const;
  // Whether the scratch holds `region` (false while suspended).
  bool hasScratch(int region) const { return scratch_ && scratch_->has(region); }
  // Routed: whether this host's ranks form the load/store team (loadStoreRank).
  bool hostIsLoadStoreTeam() const;

  int rank_ = 0;
  int nranks_ = 0;
  int device_ = 0;
  NativeLayout layout_;     // what the ranks agreed on (native path), kept for resume()
  bool suspended_ = false;  // scratch released by suspend()
  std::unique_ptr<Bootstrap> bootstrap_;
  Topology topology_;
  // The peer-mapped scratch: one buffer a rank, cut into the regions of ScratchRegion (null while
  // suspended).
  std::unique_ptr<PeerBuffer> scratch_;
  int* hostFlags_ = nullptr;            // [0] abort, [1] kernel error; host-mapped
  std::atomic<int> lostRank_{-1};       // the first peer found gone
  AbortLink childSetups_;               // ncclCommSplit/Shrink children being set up
  uint64_t* deviceCounters_ = nullptr;  // collective steps, blocks done, p2p steps per peer and channel
  Transports transports_{};
  AlgorithmSelector selector_;
  CostModel costModel_;
  StreamOrder order_;
  std::unique_ptr<RoutedComm> routed_;  // set: every call goes there (hierarchical or all-stock)
  Communicator* intra_ = nullptr;       // hierarchical: the intra-host communicator that routed_ owns
  mutable std::mutex windowsMutex_;
  std::vector<std::unique_ptr<SymmetricWindow>> windows_;
  std::unique_ptr<MappedAllocations> mapped_;  // users' allocations shared with the peers (null: off)
  uint64_t commHash_ = 0;                      // NCCL's commHash: a hash of the unique id
  std::unique_ptr<StallWatch> stallWatch_;     // null: stall reports are off (MSCCLPP_NCCL_STALL_REPORT=0)
  std::unique_ptr<BlockShare> blocks_;         // this rank's blocks of its GPU (native path)
  OneSided oneSided_;                          // signal counters in the sync region, after the barrier flags
};

}  // namespace mscclpp_nccl
