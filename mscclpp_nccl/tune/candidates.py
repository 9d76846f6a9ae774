"""The tuner's candidates: the library's algorithms, launch shapes (blocks, threads, chunk bytes), the
MSCCLPP_NCCL_ALGO items that force them, and the default grid per collective."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..bench.collectives import COLLECTIVES

ALGO_ENV = "MSCCLPP_NCCL_ALGO"

# The library's algorithms (native/algorithms/registry.cc) and the collectives each serves. The library
# ignores the whole of MSCCLPP_NCCL_ALGO when an item names an algorithm it does not know (it warns and
# uses its own rules), which would time the wrong thing: so only these names are accepted here. Keep in
# step with the registry. allreduce_zero_copy is not here: it needs windows (the tuner's buffers are
# plain), and the library picks it by rule for buffers that lie in them.
# The collectives the exchange kernels serve: every one but all_reduce and sendrecv.
EXCHANGE_COLLECTIVES: tuple[str, ...] = tuple(c for c in COLLECTIVES if c not in ("all_reduce", "sendrecv"))
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce_one_shot_packet": ("all_reduce",),
    "allreduce_two_shot_packet": ("all_reduce",),
    "allreduce_two_shot_chunked": ("all_reduce",),
    "exchange_packet": EXCHANGE_COLLECTIVES,
    "exchange_chunked": EXCHANGE_COLLECTIVES,
    "p2p_packet": ("sendrecv",),
    "p2p_chunked": ("sendrecv",),
    "reduce_two_shot_packet": ("reduce",),
}
BLOCK_GRID = (1, 2, 4, 8, 16, 32)
MAX_PACKET_BLOCKS = 32  # kMaxPacketBlocks: the library's grid cap
STOCK = "stock"  # the pseudo-algorithm of the stock NCCL comparison run


@dataclass(frozen=True)
class Candidate:
    """One algorithm with a launch shape for one collective; None fields are the library's default."""

    collective: str
    algorithm: str
    blocks: int | None = None
    threads: int | None = None
    chunk_bytes: int | None = None

    @property
    def spec(self) -> str:
        """algorithm[/blocks[/threads[/chunk_bytes]]], 0 standing for a default before a given field."""
        fields = [self.blocks, self.threads, self.chunk_bytes]
        while fields and fields[-1] is None:
            fields.pop()
        return "/".join([self.algorithm, *(str(f or 0) for f in fields)])

    @property
    def item(self) -> str | None:
        """The MSCCLPP_NCCL_ALGO value that forces this candidate (None for the stock run)."""
        return None if self.algorithm == STOCK else f"{self.collective}={self.spec}"

    @property
    def label(self) -> str:
        """A short name for progress lines and plots: one_shot/8, two_shot, exchange/4, p2p."""
        return short_name(self.algorithm) + self.spec[len(self.algorithm) :]

    def rule(self, max_bytes: int | None) -> dict[str, Any]:
        """The table rule that chooses this candidate up to max_bytes (None: any size)."""
        rule: dict[str, Any] = {"max_bytes": max_bytes, "algorithm": self.algorithm}
        for key in ("blocks", "threads", "chunk_bytes"):
            value = getattr(self, key)
            if value is not None:
                rule[key] = value
        return rule

    def to_doc(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "label": self.label,
            "item": self.item,
            "algorithm": self.algorithm,
            "blocks": self.blocks,
            "threads": self.threads,
            "chunk_bytes": self.chunk_bytes,
        }

    @classmethod
    def from_doc(cls, collective: str, doc: dict[str, Any]) -> Candidate:
        return cls(
            collective, doc["algorithm"], doc.get("blocks"), doc.get("threads"), doc.get("chunk_bytes")
        )


def short_name(algorithm: str) -> str:
    name = algorithm.removeprefix("allreduce_").removesuffix("_packet")
    return name or algorithm


def _shape_field(text: str, item: str) -> int | None:
    # As the library reads them: decimal, non-negative; 0 means the default.
    if not text.isdigit():
        raise ValueError(f"candidate {item!r}: {text!r} is not a non-negative integer")
    value = int(text)
    return value or None


def parse_candidate(text: str, collectives: Sequence[str] = COLLECTIVES) -> list[Candidate]:
    """Candidates of one MSCCLPP_NCCL_ALGO item, `[collective=]algorithm[/blocks[/threads[/chunk]]]`.

    A bare algorithm gives one candidate per collective in `collectives` that it serves; a named
    collective outside `collectives` gives none.
    """
    item = text.strip()
    if not item:
        raise ValueError("empty candidate")
    named: str | None = None
    body = item
    if "=" in item:
        named, body = (s.strip() for s in item.split("=", 1))
        if named not in COLLECTIVES:
            raise ValueError(
                f"candidate {item!r}: unknown collective {named!r}; one of {', '.join(COLLECTIVES)}"
            )
    parts = body.split("/")
    algorithm = parts[0].strip()
    if algorithm not in ALGORITHMS:
        raise ValueError(
            f"candidate {item!r}: unknown algorithm {algorithm!r}; one of {', '.join(ALGORITHMS)}"
            " (the library ignores MSCCLPP_NCCL_ALGO altogether when it does not know a name)"
        )
    if len(parts) > 4:
        raise ValueError(f"candidate {item!r}: at most blocks/threads/chunk_bytes after the algorithm")
    shape = [_shape_field(p.strip(), item) for p in parts[1:]] + [None] * (4 - len(parts))
    served = ALGORITHMS[algorithm]
    if named is not None:
        if named not in served:
            raise ValueError(f"candidate {item!r}: {algorithm} does not serve {named}")
        targets = [named] if named in collectives else []
    else:
        targets = [c for c in collectives if c in served]
    return [Candidate(c, algorithm, *shape) for c in targets]


def parse_candidate_specs(specs: Sequence[str], collectives: Sequence[str]) -> dict[str, list[Candidate]]:
    """--candidates: items (each may hold several, comma-separated) -> candidates per collective, in the
    order given, without duplicates. Collectives that no item serves are absent."""
    out: dict[str, list[Candidate]] = {}
    for spec in specs:
        for item in spec.split(","):
            if not item.strip():
                continue
            for cand in parse_candidate(item, collectives):
                bucket = out.setdefault(cand.collective, [])
                if cand not in bucket:
                    bucket.append(cand)
    return {c: out[c] for c in collectives if c in out}


def block_cap(sm_count: int, ranks_per_gpu: int) -> int:
    """The library's grid cap: the SMs of the GPU shared by its ranks, at most kMaxPacketBlocks."""
    if sm_count <= 0:
        return MAX_PACKET_BLOCKS
    return max(1, min(MAX_PACKET_BLOCKS, sm_count // max(1, ranks_per_gpu)))


def default_candidates(collective: str, max_blocks: int = MAX_PACKET_BLOCKS) -> list[Candidate]:
    """Each algorithm serving the collective with default blocks, then blocks 1, 2, 4, ... 32 up to the
    GPU's cap (and the cap itself when it falls between); threads and chunks default. Send/recv kernels
    size their grids by their transfers, so their algorithms come plain."""
    grid = [b for b in BLOCK_GRID if b <= max_blocks]
    if max_blocks < MAX_PACKET_BLOCKS and max_blocks not in grid:
        grid.append(max_blocks)
    out: list[Candidate] = []
    for algorithm, served in ALGORITHMS.items():
        if collective in served:
            out.append(Candidate(collective, algorithm))
            if collective != "sendrecv":
                out += [Candidate(collective, algorithm, b) for b in grid]
    return out


def algo_env(candidates: Sequence[Candidate]) -> str:
    """The MSCCLPP_NCCL_ALGO value forcing these candidates (one per collective)."""
    return ",".join(c.item for c in candidates if c.item)
