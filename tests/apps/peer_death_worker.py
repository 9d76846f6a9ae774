"""One rank of a PyTorch job whose last rank is killed (SIGKILL) while the others have all-reduces queued,
on our libnccl.so.2 (LD_PRELOAD); run N of them through the launcher:

    python -m mscclpp_nccl.run -n 4 --mps --timeout 150 -- \\
        env LD_PRELOAD=$PWD/mscclpp_nccl/lib/libnccl.so.2 python tests/apps/peer_death_worker.py DIR

DIR is a directory the ranks share. As in tests/gpu/failure_worker.py, the victim's rank runs in a child
process, so that the launcher does not stop the survivors when it dies. Each survivor keeps issuing
all-reduces, as a training loop would, until PyTorch raises: through its watchdog, which polls
ncclCommGetAsyncError (TORCH_NCCL_ASYNC_ERROR_HANDLING=2), or through the next call's ncclRemoteError
(=0). Then dist.destroy_process_group() must end promptly, and so must the process. PyTorch's shutdown
calls ncclCommFinalize, which reports the communicator's asynchronous error as stock NCCL's does, so
destroy_process_group may raise that ncclRemoteError instead of returning; either ends the test's wait.

Prints `RESULT peer_death handling=H detect_s=... destroy_s=...` and `PASS peer_death` on each survivor,
then leaves with os._exit, as a failed worker of an elastic job does: at a normal interpreter exit,
PyTorch 2.11's watchdog, having seen the error, ends the process with std::terminate ("Broken promise"),
whichever NCCL is underneath. PEER_DEATH_NORMAL_EXIT=1 exits normally instead (to study that exit).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import app_common
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
from failure_worker import CHILD_FLAG, die, mark, run_victim_child, wait_for

QUEUED_CALLS = 400
VICTIM_CALLS = 3
DETECT_LIMIT_S = 10.0  # PyTorch's watchdog polls every few hundred ms; the library reports in ~1 ms
DESTROY_LIMIT_S = 10.0


def victim(shared: Path, data: torch.Tensor, size: int) -> None:
    for _ in range(VICTIM_CALLS):
        dist.all_reduce(data)
    torch.cuda.synchronize()
    wait_for([shared / f"queued.{r}" for r in range(size - 1)])
    die(shared)


def survivor(shared: Path, data: torch.Tensor, rank: int) -> str:
    for _ in range(QUEUED_CALLS):  # all but VICTIM_CALLS of these wait for the victim
        dist.all_reduce(data, async_op=True)
    mark(shared / f"queued.{rank}")
    wait_for([shared / "killed_at"])
    killed_at = float((shared / "killed_at").read_text())
    error: BaseException | None = None
    while error is None and time.monotonic() - killed_at < DETECT_LIMIT_S:
        try:
            dist.all_reduce(data)
            torch.cuda.synchronize()
            time.sleep(0.01)
        except Exception as e:  # DistBackendError or RuntimeError, depending on who saw it first
            error = e
    detect = time.monotonic() - killed_at
    assert error is not None, f"no error {detect:.1f} s after rank {rank}'s peer was killed"
    start = time.monotonic()
    ending = "returned"
    try:
        dist.destroy_process_group()
    except dist.DistBackendError as e:
        assert "ncclRemoteError" in str(e), f"destroy_process_group raised another error: {e}"
        ending = "raised ncclRemoteError"
    destroy = time.monotonic() - start
    handling = os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "default")
    first_line = str(error).splitlines()[0][:100]
    print(
        f"RESULT peer_death handling={handling} detect_s={detect:.3f} destroy_s={destroy:.3f} "
        f"destroy={ending.replace(' ', '_')} error={type(error).__name__}: {first_line}",
        flush=True,
    )
    assert destroy < DESTROY_LIMIT_S, f"destroy_process_group took {destroy:.1f} s"
    return f"detected after {detect:.3f} s, destroy_process_group {ending} after {destroy:.3f} s"


def main() -> int:
    shared = Path(sys.argv[1])
    rank, size = app_common.common.world()
    if rank == size - 1 and CHILD_FLAG not in os.environ:
        return run_victim_child(sys.argv)
    app_common.step_init()
    data = torch.ones(16384, device=app_common.ctx.device)
    dist.all_reduce(data)
    torch.cuda.synchronize()
    if rank == size - 1:
        victim(shared, data, size)
    ok = app_common.common.run_step("peer_death", lambda: survivor(shared, data, rank), 60.0)
    if os.environ.get("PEER_DEATH_NORMAL_EXIT") != "1":
        app_common.common.hard_exit(0 if ok else 1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
