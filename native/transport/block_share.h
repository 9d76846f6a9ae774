// How the thread blocks of one GPU are shared among the communicators of this process that use it, so
// that every kernel that may be waiting for a peer can be resident at the same time (the progress rule,
// README.md, "Progress with many communicators on one GPU").
//
// A kernel that waits for a peer holds its SMs until the peer's kernel of the same call runs. Different
// ranks may reach calls of different communicators in different orders (NCCL allows it), so a rank can
// have one waiting kernel per communicator, each of which other ranks' kernels must not be kept from.
// The rule: the grids of all kernels that may wait at once fit the GPU together.
//  - A GPU of S SMs shared by P ranks gives each rank S / P blocks, one block per SM (our heaviest kernels
//    are resident one per SM). P is the most ranks on this GPU that any communicator of the process has
//    seen: a communicator of the tensor-parallel pair still knows that the world has eight.
//  - A rank's communicators split its blocks; no two of them hold the same block. The first takes them
//    all. A split child takes the half that its parent gives up at the split (the split is a call of the
//    parent, so every parent rank shrinks between the same two of its calls). A communicator created on
//    its own takes what is free, at least one block.
//  - Calls of one communicator run in order (native/stream_order.h), so each has at most one running
//    kernel and one parked behind it (launched early, native/device/dependent_launch.cuh). A
//    communicator that may launch grids of g blocks holds g plus the largest grid it launches early,
//    earlyBlocks(g), so both fit at once whatever the kind of kernel.
// The blocks a communicator uses are agreed among its ranks (grids must match), so each rank proposes
// what it can give and all take the smallest proposal.
#pragma once

#include <mutex>

namespace mscclpp_nccl {

class BlockShare {
 public:
  // Reserves a proposal for a new communicator rank on `device` (S = smCount), whose communicator puts
  // `ranksOnGpu` ranks on this GPU, `ranksOfProcess` of them in this process.
  BlockShare(int device, int smCount, int ranksOnGpu, int ranksOfProcess);
  ~BlockShare();
  BlockShare(const BlockShare&) = delete;
  BlockShare& operator=(const BlockShare&) = delete;

  // The largest grid this rank can give the new communicator.
  int proposed() const { return grid_; }
  // Keeps a grid of `agreed` blocks (the smallest proposal of all ranks) and frees the rest.
  void settle(int agreed);
  // Gives up about half of its blocks (a grid of one block at least stays) to a communicator split
  // from this one; returns the grid kept.
  int halve();
  int grid() const { return grid_; }

  // The blocks a rank of a GPU of `smCount` SMs shared by `ranksOnGpu` ranks may hold: its share.
  static int rankShare(int smCount, int ranksOnGpu);
  // The largest grid launched early by a communicator whose grids have at most `grid` blocks.
  static int earlyBlocks(int grid);
  // The blocks a communicator with grids of at most `grid` blocks holds: a running grid and a parked one.
  static int held(int grid) { return grid + earlyBlocks(grid); }
  // The largest grid whose held blocks fit in `blocks` (at least 1, at most the largest grid launched).
  static int gridWithin(int blocks);
  // The blocks that this process's communicators hold on `device`, and what they may hold there.
  static int heldOn(int device);
  static int capacityOn(int device);

 private:
  void resize(int grid);

  int device_;
  int grid_ = 0;
};

}  // namespace mscclpp_nccl
