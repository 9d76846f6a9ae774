"""CPU tests of the algorithm selector: tests/selector_driver.cc (the selector, registry and tuning table,
no kernels) is built with g++ against the CUDA headers and asked for choices as communicators of several
shapes would ask. Checks the built-in rules, the shipped table, MSCCLPP_NCCL_ALGO, and that every launch
shape stays inside what the kernels accept (grid caps, whole packet words or 16-byte chunk units, slots)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from host_build import REPO, build_driver, driver_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stock_nccl import require_cuda_include

SOURCES = [
    "native/common/json.cc",
    "native/common/logging.cc",
    "native/common/env.cc",
    "native/common/parameters.cc",
    "native/algorithms/tuning_table.cc",
    "native/algorithms/registry.cc",
    "native/algorithms/collective_names.cc",
    "native/algorithms/algorithm_selector.cc",
    "native/algorithms/cost_model.cc",
    "native/algorithms/forced_algorithms.cc",
    "native/algorithms/send_recv.cc",
    "native/collective_plans.cc",
    "native/transport/block_share.cc",
    "tests/selector_driver.cc",
]
H200 = "NVIDIA H200"
SHIPPED = REPO / "mscclpp_nccl" / "tuning" / "default.json"
NO_TABLE = "/nonexistent/tuning.json"
PACKET_THREADS = 512  # kPacketThreads
CHUNK_THREADS = 512  # kChunkThreads
MAX_PACKET_BLOCKS = 32  # kMaxPacketBlocks
MAX_CHUNK_BLOCKS = 64  # kMaxChunkBlocks
CHUNKED = ("allreduce_two_shot_chunked", "exchange_chunked", "p2p_chunked")
ZERO_COPY = "allreduce_zero_copy"
MAX_ZERO_COPY_BLOCKS = 64  # kMaxZeroCopyBlocks
ZERO_COPY_THREADS = 512  # kZeroCopyThreads
ZERO_COPY_MIN_BYTES = 1 << 20  # kZeroCopyMinBytes
P2P_PACKET_MAX_BYTES = 512 << 10  # kP2pPacketMaxBytes: larger transfers go in chunks
EARLY_LAUNCH_MAX_BLOCKS = 32  # kEarlyLaunchMaxBlocks


@dataclass(frozen=True)
class Comm:
    """A communicator's selector setup: as Communicator::connect derives it."""

    nranks: int
    ranks_per_gpu: int
    resident_blocks: int  # SMs / ranks per GPU
    chunk_slot_bytes: int
    slot_packets: int

    @property
    def chunk_blocks(self) -> int:
        return min(self.resident_blocks, MAX_CHUNK_BLOCKS)

    def args(self) -> list[str]:
        numbers = [
            self.nranks,
            self.ranks_per_gpu,
            self.resident_blocks,
            self.chunk_slot_bytes,
            self.slot_packets,
        ]
        return [H200, *map(str, numbers)]


# 132 SMs shared by 2, 4, 8 and 9 ranks, one communicator each: the grid whose running and parked
# kernels fit the rank's share (66, 33, 16, 14 blocks; native/transport/block_share.h); chunk slots as
# the default 32 MiB budget gives them.
COMMS = {
    2: Comm(2, 2, 44, 131072, 4096),
    4: Comm(4, 4, 22, 126976, 2048),
    8: Comm(8, 8, 11, 131072, 1024),
    9: Comm(9, 9, 9, 131072, 1024),
}


def early_launch_blocks(comm: Comm) -> int:
    """The largest grid launched early: half of the communicator's grid, at most the cap."""
    return min(EARLY_LAUNCH_MAX_BLOCKS, comm.resident_blocks // 2)


def direct_blocks(comm: Comm) -> int:
    """The largest zero-copy grid: every block the communicator holds, a parked kernel's included (a
    zero-copy grid never runs beside one), at most the cap."""
    return min(comm.resident_blocks + early_launch_blocks(comm), MAX_ZERO_COPY_BLOCKS)


@dataclass(frozen=True)
class Choice:
    algorithm: str
    blocks: int
    threads: int
    chunk_bytes: int
    source: str
    early: bool


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("selector") / "selector_driver"
    return build_driver(out, SOURCES, COMMS[4].args(), 0, [require_cuda_include()])


def choose(
    driver: Path, comm: Comm, queries: list[str], table: str = NO_TABLE, algo: str = ""
) -> list[Choice]:
    env = driver_env()
    env["MSCCLPP_NCCL_TUNING_FILE"] = table
    if algo:
        env["MSCCLPP_NCCL_ALGO"] = algo
    proc = subprocess.run(
        [str(driver), *comm.args()], input="\n".join(queries) + "\n", capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert len(rows) == len(queries) and all(len(r) == 6 for r in rows), proc.stdout
    return [Choice(r[0], int(r[1]), int(r[2]), int(r[3]), r[4], r[5] == "1") for r in rows]


def assert_launchable(choice: Choice, comm: Comm) -> None:
    """The shape is one the kernels accept: co-resident grid, legal threads, chunk within a slot; only
    small grids launch early, and only where a parked one and a running one fit the rank's share."""
    assert choice.early == (choice.blocks <= early_launch_blocks(comm)), choice
    if choice.algorithm == ZERO_COPY:
        assert 1 <= choice.blocks <= direct_blocks(comm), choice
        assert 32 <= choice.threads <= ZERO_COPY_THREADS and choice.threads % 32 == 0, choice
    elif choice.algorithm in CHUNKED:
        assert 1 <= choice.blocks <= comm.chunk_blocks, choice
        assert 32 <= choice.threads <= CHUNK_THREADS and choice.threads % 32 == 0, choice
        assert 16 <= choice.chunk_bytes <= comm.chunk_slot_bytes and choice.chunk_bytes % 16 == 0, choice
    else:
        assert 1 <= choice.blocks <= min(comm.resident_blocks, MAX_PACKET_BLOCKS), choice
        assert 32 <= choice.threads <= PACKET_THREADS and choice.threads % 32 == 0, choice
        assert 8 <= choice.chunk_bytes <= comm.slot_packets * 8 and choice.chunk_bytes % 8 == 0, choice


SIZES = [1, 8, 1000, 65536, 65537, 524288, 524289, 1 << 20, (1 << 20) + 1, 33554432, 33554433, 1 << 31]
COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "gather"]


def test_built_in_rules(driver: Path) -> None:
    comm = COMMS[4]
    got = choose(driver, comm, ["all_reduce 2 65536", "all_reduce 2 65537", "all_reduce 4 1048577"])
    assert [c.algorithm for c in got] == [
        "allreduce_one_shot_packet",
        "allreduce_two_shot_packet",
        "allreduce_two_shot_chunked",
    ]
    got = choose(
        driver, comm, ["all_gather 2 524288", "alltoall 1 524289", "sendrecv 1 524288", "sendrecv 4 524289"]
    )
    assert [c.algorithm for c in got] == ["exchange_packet", "exchange_chunked", "p2p_packet", "p2p_chunked"]
    assert all(c.source == "rules" for c in got)


@pytest.mark.parametrize(
    "nranks, two_shot_from",
    [(2, None), (4, None), (8, 256 << 10), (9, 256 << 10)],
)
def test_reduce_spreads_from_8_ranks(driver: Path, nranks: int, two_shot_from: int | None) -> None:
    """From 8 ranks a reduce leaves the one-step exchange (the root reduces every rank's range) for the
    two-shot packet reduce from 256 KB, up to 1 MB; chunks beyond."""
    sizes = [(256 << 10) - 1, 256 << 10, (256 << 10) + 1, 512 << 10, (512 << 10) + 1, 1 << 20, (1 << 20) + 1]
    got = choose(driver, COMMS[nranks], [f"reduce 2 {size}" for size in sizes])
    expected = [
        "exchange_chunked"
        if size > 1 << 20
        else "reduce_two_shot_packet"
        if two_shot_from and size >= two_shot_from
        else "exchange_packet"
        if size <= 512 << 10
        else "exchange_chunked"
        for size in sizes
    ]
    assert [c.algorithm for c in got] == expected


@pytest.mark.parametrize("nranks", sorted(COMMS))
def test_every_shape_is_launchable(driver: Path, nranks: int) -> None:
    comm = COMMS[nranks]
    queries = [
        f"{coll} {dtype} {size} {registered}"
        for coll in COLLECTIVES
        for dtype in (1, 2, 4, 8)
        for size in SIZES
        for registered in (0, 1)
    ]
    for table in (NO_TABLE, str(SHIPPED)):
        for choice in choose(driver, comm, queries, table):
            assert_launchable(choice, comm)


def test_default_chunked_shape(driver: Path) -> None:
    """Chunked defaults: a block per 16 KiB of the per-rank range (within the chunk channel count), the range
    split evenly in whole units, at most a slot."""
    comm = COMMS[4]
    [big, small] = choose(driver, comm, ["all_reduce 2 33554432", "all_gather 2 1048577"])
    assert (big.blocks, big.chunk_bytes) == (comm.chunk_blocks, comm.chunk_slot_bytes)
    assert small.algorithm == "exchange_chunked" and small.blocks == comm.chunk_blocks == 22
    per_block = -(-((1 << 20) + 1) // 22)
    assert small.chunk_bytes == -(-per_block // 16) * 16 == 47664


def test_forced_shapes_are_clamped(driver: Path) -> None:
    comm = COMMS[4]
    algo = "all_reduce=allreduce_two_shot_chunked/100/1000/1000,all_gather=exchange_chunked/5/64/1"
    [ar, ag] = choose(driver, comm, ["all_reduce 2 1024", "all_gather 2 4096"], algo=algo)
    assert (ar.algorithm, ar.blocks, ar.threads, ar.chunk_bytes, ar.source) == (
        "allreduce_two_shot_chunked",
        comm.chunk_blocks,
        CHUNK_THREADS,
        1008,
        "forced",
    )
    assert (ag.algorithm, ag.blocks, ag.threads, ag.chunk_bytes) == ("exchange_chunked", 5, 64, 16)


def test_forced_numbers_past_int_are_refused(driver: Path) -> None:
    """Blocks and threads are ints: 2^32 + 1 blocks would be cut to 1, so the setting is ignored instead."""
    comm = COMMS[4]
    for algo in ("allreduce_one_shot_packet/4294967297", "allreduce_one_shot_packet/1/4294967328"):
        [choice] = choose(driver, comm, ["all_reduce 2 1024"], algo=f"all_reduce={algo}")
        assert choice.source != "forced", (algo, choice)


def test_a_bad_forced_item_refuses_the_whole_setting(driver: Path) -> None:
    """MSCCLPP_NCCL_ALGO is all or nothing: a good item before a bad one is not applied on its own (ranks
    would then run what nobody asked for), nor is an item naming a collective that does not exist."""
    comm = COMMS[4]
    for algo in (
        "all_reduce=allreduce_two_shot_chunked,no_such_algorithm",
        "all_reduce=allreduce_two_shot_chunked,all_gather=allreduce_one_shot_packet",
        "all_reduce=allreduce_two_shot_chunked,allgather=exchange_chunked",
    ):
        [choice] = choose(driver, comm, ["all_reduce 2 1024"], algo=algo)
        assert (choice.algorithm, choice.source) == ("allreduce_one_shot_packet", "rules"), algo
    [choice] = choose(driver, comm, ["all_reduce 2 1024"], algo="all_reduce=allreduce_two_shot_chunked")
    assert (choice.algorithm, choice.source) == ("allreduce_two_shot_chunked", "forced")


def test_no_chunk_channels_means_no_chunked_algorithm(driver: Path) -> None:
    """Past kMaxChunkRanks ranks there are no chunk channels: neither the rules nor MSCCLPP_NCCL_ALGO pick
    them."""
    comm = Comm(65, 1, 132, 0, 32)
    for algo in ("", "allreduce_two_shot_chunked,exchange_chunked,p2p_chunked"):
        queries = ["all_reduce 4 1073741824", "all_gather 4 1073741824", "sendrecv 4 1073741824"]
        got = choose(driver, comm, queries, algo=algo)
        assert [c.algorithm for c in got] == ["allreduce_two_shot_packet", "exchange_packet", "p2p_packet"], (
            got
        )


def test_shipped_table_is_read(driver: Path) -> None:
    got = choose(
        driver,
        COMMS[4],
        ["all_reduce 2 1048576", "all_reduce 4 2097152", "all_reduce 2 33554433"],
        str(SHIPPED),
    )
    assert [(c.algorithm, c.source) for c in got] == [
        ("allreduce_two_shot_packet", "table"),
        ("allreduce_two_shot_packet", "table"),
        ("allreduce_two_shot_chunked", "table"),
    ]


def test_shipped_table_at_8_ranks(driver: Path) -> None:
    """At 8 ranks on one H200 the packet exchange beats the chunked one up to these ranges (gather and
    scatter 1 MB by 27-35%, broadcast 256 KB and all_gather 4 MB by 14-16%); past them the chunked one
    takes over."""
    queries = ["gather 2 131072", "scatter 2 131072", "broadcast 2 262144", "all_gather 2 524288"]
    queries += ["gather 2 131073", "scatter 2 131073", "broadcast 2 262145", "all_gather 2 524289"]
    got = choose(driver, COMMS[8], queries, str(SHIPPED))
    assert [c.algorithm for c in got] == ["exchange_packet"] * 4 + ["exchange_chunked"] * 4
    assert {c.source for c in got} == {"table"}


def test_shipped_table_reduce_at_8_ranks(driver: Path) -> None:
    """At 8 ranks reduce takes the one-step packet exchange up to 256 KB (it beats the two-shot there on
    one H200: 10.1 / 13.1 us graph / eager on 16 blocks against 11.3 / 14.6), the two-shot packet
    schedule to 1 MB (the chunked exchange took 23.9 us in graphs at 1 MB against the two-shot's 19.3),
    on the all-reduce's default grid: a block per 512 words of the segment each rank reduces."""
    queries = [
        "reduce 2 131072",
        "reduce 2 262144",
        "reduce 2 262145",
        "reduce 2 524288",
        "reduce 2 1048576",
        "reduce 2 1048577",
    ]
    got = choose(driver, COMMS[8], queries, str(SHIPPED))
    assert [c.algorithm for c in got] == ["exchange_packet"] * 2 + ["reduce_two_shot_packet"] * 3 + [
        "exchange_chunked"
    ]
    assert got[1].blocks == min(16, COMMS[8].resident_blocks), got[1]
    two_shot = got[3]
    assert (two_shot.blocks, two_shot.threads) == (min(16, COMMS[8].resident_blocks), 512), two_shot


def test_shipped_table_all_reduce_at_8_ranks(driver: Path) -> None:
    """At 8 ranks all_reduce stays one-shot to 64 KB, on 16 blocks there (7.1 / 9.6 us graph / eager on
    one H200 against the two-shot's 11.1 / 14.5), then takes two-shot packets."""
    queries = ["all_reduce 2 32768", "all_reduce 2 65536", "all_reduce 2 65537", "all_reduce 2 2097152"]
    got = choose(driver, COMMS[8], queries, str(SHIPPED))
    assert [c.algorithm for c in got] == ["allreduce_one_shot_packet"] * 2 + ["allreduce_two_shot_packet"] * 2
    assert got[1].blocks == min(16, COMMS[8].resident_blocks), got[1]


def test_shipped_table_alltoall_at_8_ranks(driver: Path) -> None:
    """At 8 ranks alltoall takes packets to 256 KB ranges, then the chunked exchange on its default grid
    and chunk: at 512 KB ranges (4 MB buffers) 16 blocks of 32 KB chunks took 59.5 us in graphs on one
    H200 where 64 KB chunks took 73.9 and stock 82.8."""
    got = choose(driver, COMMS[8], ["alltoall 2 262144", "alltoall 2 524288"], str(SHIPPED))
    assert [c.algorithm for c in got] == ["exchange_packet", "exchange_chunked"], got
    assert got[1].blocks == min(16, COMMS[8].resident_blocks), got[1]


def test_shipped_table_rooted_at_4_ranks(driver: Path) -> None:
    """At 4 ranks broadcast stays on packets to 1 MB (9.4 us in graphs there against the chunked
    exchange's 12.5) and reduce takes the two-shot packet schedule at 1 MB (10.2 against 12.0, one
    H200); above, both go chunked."""
    queries = ["broadcast 2 1048576", "broadcast 2 1048577", "reduce 2 524288", "reduce 2 1048576"]
    got = choose(driver, COMMS[4], [*queries, "reduce 2 1048577"], str(SHIPPED))
    assert [c.algorithm for c in got] == [
        "exchange_packet",
        "exchange_chunked",
        "exchange_packet",
        "reduce_two_shot_packet",
        "exchange_chunked",
    ]


def test_packet_work_spreads_over_the_blocks(driver: Path) -> None:
    """Packet defaults: a block per 512 words, each block a fair share of the words (not a whole slot,
    which would leave one block doing a small message alone), a slot at most per step."""
    comm = COMMS[4]
    got = choose(
        driver,
        comm,
        ["all_reduce 2 16384", "all_reduce 2 1024", "all_gather 4 65536", "all_reduce 2 1048576"],
    )
    assert [(c.blocks, c.chunk_bytes) for c in got][:3] == [(4, 4096), (1, 1024), (16, 4096)]
    assert got[3].blocks == comm.resident_blocks == 22, got[3]  # 32 wanted, the grid caps it
    [big] = choose(driver, comm, ["all_gather 2 524288"])
    assert big.blocks == 22 and big.chunk_bytes <= comm.slot_packets * 8


@pytest.mark.parametrize("table", [NO_TABLE, str(SHIPPED)])
def test_zero_copy_only_for_windows(driver: Path, table: str) -> None:
    """Buffers in mapped windows go zero-copy from the threshold on, whatever the table says; other
    buffers and other collectives never do, even when MSCCLPP_NCCL_ALGO names it."""
    comm = COMMS[4]
    edge = ZERO_COPY_MIN_BYTES
    queries = [f"all_reduce 2 {edge - 2} 1", f"all_reduce 2 {edge} 1", "all_reduce 2 33554432 1"]
    queries += ["all_reduce 2 33554432 0", "all_gather 2 33554432 1"]
    got = choose(driver, comm, queries, table)
    assert [c.algorithm for c in got][1:3] == [ZERO_COPY, ZERO_COPY]
    assert got[0].algorithm != ZERO_COPY and all(c.algorithm != ZERO_COPY for c in got[3:]), got
    for algo in (ZERO_COPY, f"all_reduce={ZERO_COPY}/7/256"):
        forced = choose(driver, comm, ["all_reduce 2 1024 1", "all_reduce 2 1024 0"], table, algo=algo)
        assert (forced[0].algorithm, forced[0].source) == (ZERO_COPY, "forced"), forced
        assert forced[1].algorithm != ZERO_COPY, forced


def test_early_launch_within_the_communicator_grid(driver: Path) -> None:
    """A parked kernel and a running one of a communicator fit the blocks it holds: grids of up to half
    its grid launch early, also after a split has halved the grid (the "grid N" line)."""
    for comm in (COMMS[4], COMMS[8]):
        for grid in (comm.resident_blocks, comm.resident_blocks // 2):
            largest = min(EARLY_LAUNCH_MAX_BLOCKS, grid // 2)
            for blocks in (max(largest, 1), largest + 1):
                algo = f"all_reduce=allreduce_one_shot_packet/{blocks}"
                got = choose(driver, comm, [f"grid {grid}", "all_reduce 2 1024"], algo=algo)
                expected = min(blocks, grid)
                assert (got[-1].blocks, got[-1].early) == (expected, expected <= largest), (comm, grid, got)


def maps(driver: Path, comm: Comm, queries: list[str], table: str = NO_TABLE, algo: str = "") -> list[bool]:
    """Whether each call ("collective elementBytes bytes premul") takes the mapped zero-copy path."""
    env = driver_env()
    env["MSCCLPP_NCCL_TUNING_FILE"] = table
    if algo:
        env["MSCCLPP_NCCL_ALGO"] = algo
    text = "".join(f"maps {q}\n" for q in queries)
    proc = subprocess.run([str(driver), *comm.args()], input=text, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.split()
    assert rows[0::2] == ["maps"] * len(queries), proc.stdout
    return [flag == "1" for flag in rows[1::2]]


@pytest.mark.parametrize("table", [NO_TABLE, str(SHIPPED)])
def test_mapped_zero_copy_from_the_thresholds_whatever_the_table(driver: Path, table: str) -> None:
    """Outside windows: all_reduce from 1 MB and exchanges from large enough ranges and traffic (below),
    whatever their scratch choice (the mapped kernel runs the chunked schedule itself when the ranks
    agree on scratch); never send/recv, PreMulSum or a forced algorithm."""
    comm = COMMS[4]
    queries = ["all_reduce 2 33554432 0", "all_gather 2 33554432 0", "broadcast 4 4194304 0"]
    queries += ["reduce 4 4194304 0", "all_reduce 2 524288 0", "broadcast 4 2097151 0"]
    queries += ["sendrecv 4 33554432 0", "all_reduce 2 33554432 1", "reduce_scatter 2 33554432 1"]
    assert maps(driver, comm, queries, table) == [True] * 4 + [False] * 5
    assert maps(driver, comm, ["all_reduce 2 1048576 0", "all_reduce 2 1048575 0"], table) == [True, False]
    # Where the table keeps packets (the tuner never times a mapped call), the call maps all the same.
    assert maps(driver, comm, ["all_reduce 2 2097152 0"], table) == [True]
    forced = maps(
        driver, comm, ["all_reduce 2 33554432 0", "all_gather 2 33554432 0"], table, algo=CHUNKED[0]
    )
    assert forced == [False, True], "a forced all_reduce algorithm must be exactly what runs"


def test_exchanges_map_over_packets_with_a_chunked_fallback(driver: Path) -> None:
    """The tuner times forced algorithms, which never map: where the shipped 4-rank table keeps all_gather
    on packets (2 MB ranges), the call still maps, and falls back on the chunked exchange's default grid.
    Where the table chose the chunked schedule, the fallback is that choice, shape and all."""
    comm = COMMS[4]
    table = str(SHIPPED)
    [chosen] = choose(driver, comm, ["all_gather 2 2097152"], table)
    assert chosen.algorithm == "exchange_packet", "the shipped table no longer keeps packets here"
    assert maps(driver, comm, ["all_gather 2 2097152 0"], table) == [True]
    queries = ["mapped-fallback all_gather 2 2097152", "mapped-fallback reduce_scatter 2 4194304"]
    fallback = choose(driver, comm, queries, table)
    [default] = choose(driver, comm, ["all_gather 2 2097152"], algo="exchange_chunked")
    assert (fallback[0].algorithm, fallback[0].blocks, fallback[0].chunk_bytes, fallback[0].source) == (
        "exchange_chunked",
        default.blocks,
        default.chunk_bytes,
        "rules",
    )
    assert fallback[1] == choose(driver, comm, ["reduce_scatter 2 4194304"], table)[0]
    [all_reduce] = choose(driver, comm, ["mapped-fallback all_reduce 2 33554432"], table)
    assert all_reduce.algorithm == "allreduce_two_shot_chunked"


# Exchanges map their buffers from 16 MB of traffic over all ranks at 2 ranks, 8 MB from 4 (a range per
# rank for rooted ones, a range per pair of ranks for the others), and never below 256 KB ranges:
# (ranks, query, maps).
TRAFFIC_CASES = [
    (2, "reduce 2 4194304 0", False),  # 8 MB moved
    (2, "reduce 2 8388608 0", True),
    (2, "gather 2 4194304 0", False),
    (2, "all_gather 2 2097152 0", False),  # 2 x 2 x 2 MB
    (2, "all_gather 2 4194304 0", True),
    (4, "reduce 2 1048576 0", False),  # 4 MB moved
    (4, "reduce 2 2097152 0", True),  # 8 MB moved
    (4, "scatter 2 2097151 0", False),
    (4, "alltoall 2 524288 0", True),  # 4 x 4 x 512 KB
    (4, "all_gather 2 524287 0", False),
    (8, "broadcast 2 1048576 0", True),  # a range per rank: 8 MB moved
    (8, "reduce 2 524287 0", False),  # under 4 MB moved
    (8, "gather 2 524287 0", False),  # gather and scatter map from 4 MB moved at 8 ranks
    (8, "gather 2 524288 0", True),
    (8, "scatter 2 524288 0", True),
    (8, "reduce 2 524288 0", False),  # 4 MB moved: others need 8 MB
    (4, "gather 2 1048576 0", False),  # 4 MB moved at 4 ranks
    (8, "alltoall 2 1048576 0", True),  # 8 x 8 x 1 MB
    (8, "reduce_scatter 2 262144 0", True),  # 8 x 8 x 256 KB
    (8, "all_gather 2 262143 0", False),  # 16 MB moved, but a range under 256 KB
]


@pytest.mark.parametrize("table", [NO_TABLE, str(SHIPPED)])
def test_mapped_exchanges_from_enough_traffic(driver: Path, table: str) -> None:
    """A mapped exchange pays a fixed cost that the scratch copies it saves must outweigh: it is taken
    only where all ranks together move enough bytes, so rooted collectives need larger ranges (gather and
    scatter less from 8 ranks)."""
    for nranks, query, expected in TRAFFIC_CASES:
        assert maps(driver, COMMS[nranks], [query], table) == [expected], (nranks, query)


def test_mapped_shape_serves_both_schedules(driver: Path) -> None:
    """The one kernel of a mapped call needs the zero-copy grid and the chunked fallback's grid: the larger
    of each dimension, launched early only where that grid is small enough."""
    comm = COMMS[4]
    text = "mapped-shape 33554432 8 512\nmapped-shape 33554432 64 256\nmapped-shape 4096 4 128\n"
    proc = subprocess.run(
        [str(driver), *comm.args()], input=text, capture_output=True, text=True, env=driver_env()
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split()[1:] for line in proc.stdout.splitlines()]
    direct = direct_blocks(comm)  # 32 MB: the whole zero-copy grid
    assert rows[0] == [str(direct), "512", "0"]
    assert rows[1] == [str(max(direct, 64)), "512", "0"]
    early = 4 <= early_launch_blocks(comm)
    assert rows[2] == ["4", "512", str(int(early))]  # 4 KB: one zero-copy block, the chunked grid's four


# How each collective's zero-copy exchange moves data, per rank (root 1 of 4): (spread, push, peers read
# its source, peers write its destination, may skip posting in windows). Each range is read once:
# all_gather and broadcast push it into every destination (broadcast spread over the ranks' segments of
# the root's range, so only the root's source is read); a reduce spreads its reduction, every rank reading
# every source and writing into the root's destination; the rest pull what they receive from the
# senders' sources. In windows only calls whose every rank passes both buffers skip posting them: rooted
# calls' ranks may pass buffers they do not use.
MAPPED_FLOWS = {
    "all_gather": {0: (0, 1, 0, 1, 1), 1: (0, 1, 0, 1, 1)},
    "broadcast": {0: (1, 1, 0, 1, 0), 1: (1, 1, 1, 1, 0)},
    "reduce": {0: (1, 0, 1, 0, 0), 1: (1, 0, 1, 1, 0)},
    "reduce_scatter": {0: (0, 0, 1, 0, 1), 1: (0, 0, 1, 0, 1)},
    "alltoall": {0: (0, 0, 1, 0, 1), 1: (0, 0, 1, 0, 1)},
    "gather": {0: (0, 0, 1, 0, 0), 1: (0, 0, 0, 0, 0)},
    "scatter": {0: (0, 0, 0, 0, 0), 1: (0, 0, 1, 0, 0)},
}


def test_mapped_flow_maps_what_peers_touch(driver: Path) -> None:
    """Which way each exchange's zero-copy call goes, and what each rank maps for its peers: a buffer a
    peer reads or writes must be mapped (else the call stays on scratch), and only those need be."""
    queries = [(name, rank) for name, ranks in MAPPED_FLOWS.items() for rank in ranks]
    text = "".join(f"mapped-flow {name} {rank} 1\n" for name, rank in queries)
    proc = subprocess.run(
        [str(driver), *COMMS[4].args()], input=text, capture_output=True, text=True, env=driver_env()
    )
    assert proc.returncode == 0, proc.stderr
    rows = [tuple(int(word) for word in line.split()[1:]) for line in proc.stdout.splitlines()]
    assert rows == [MAPPED_FLOWS[name][rank] for name, rank in queries], proc.stdout


def test_only_alltoall_in_place_posts_its_buffers_in_windows(driver: Path) -> None:
    """In place, an alltoall's peers would read source ranges already overwritten, so it goes through
    scratch (its posts say so); all_gather and reduce_scatter in place still find their peers in windows."""
    names = ["all_gather", "reduce_scatter", "alltoall"]
    text = "".join(f"mapped-flow {name} 0 1 1\n" for name in names)
    proc = subprocess.run(
        [str(driver), *COMMS[4].args()], input=text, capture_output=True, text=True, env=driver_env()
    )
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[-1] for line in proc.stdout.splitlines()] == ["1", "1", "0"], proc.stdout


def test_zero_copy_default_shape(driver: Path) -> None:
    """A block per 4 KiB of the segment each rank reduces, within the running grid's share below 16 MB and
    every block the communicator holds from there (64 of the 66 held at 2 ranks), so every size that goes
    zero-copy by rule gets the whole grid."""
    comm = COMMS[2]
    sizes = [1 << 20, (16 << 20) - 1, 16 << 20, 268435456]
    got = choose(driver, comm, [f"all_reduce 2 {size} 1" for size in sizes])
    forced = choose(driver, comm, ["all_reduce 2 65536 1"], algo=ZERO_COPY)
    assert direct_blocks(comm) == 64
    assert [(c.algorithm, c.blocks, c.threads) for c in got + forced] == [
        (ZERO_COPY, comm.resident_blocks, ZERO_COPY_THREADS),
        (ZERO_COPY, comm.resident_blocks, ZERO_COPY_THREADS),
        (ZERO_COPY, 64, ZERO_COPY_THREADS),
        (ZERO_COPY, 64, ZERO_COPY_THREADS),
        (ZERO_COPY, 8, ZERO_COPY_THREADS),
    ]


def test_zero_copy_grid_takes_parked_blocks_only_where_every_rank_holds_them(driver: Path) -> None:
    """Zero-copy grids must match on every rank: where some rank holds no blocks for a parked kernel
    (MSCCLPP_NCCL_EARLY_LAUNCH=0 there; agreed at init), every rank's grid keeps the running share."""
    comm = COMMS[4]
    got = choose(driver, comm, ["all_reduce 2 268435456 1", "parked 0", "all_reduce 2 268435456 1"])
    assert (got[0].blocks, got[2].blocks) == (direct_blocks(comm), comm.resident_blocks) == (33, 22)


def send_recv_plan(
    driver: Path,
    comm: Comm,
    size: int,
    tickets: dict[int, tuple[int, int]] | None = None,
    offered: dict[int, int] | None = None,
    algo: str = "",
) -> dict[int, dict[tuple[str, int], tuple[str, int]]]:
    """rank -> {(direction, peer): (path, kernel)} for a group sending `size` bytes to every peer and
    receiving as much from each, as runSendRecv launches it. `tickets`, if given, gets rank -> (the
    kernel given the call's ticket, or -1; the ticket the call says it published, or 0); `offered`,
    rank -> how many sends were offered for their receivers to pull."""
    queries = "".join(f"sendrecv-plan {rank} {size}\n" for rank in range(comm.nranks))
    env = driver_env()
    if algo:
        env["MSCCLPP_NCCL_ALGO"] = algo
    proc = subprocess.run([str(driver), *comm.args()], input=queries, capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr
    plans: dict[int, dict[tuple[str, int], tuple[str, int]]] = {}
    given, published = -1, 0
    rank = 0
    for line in proc.stdout.splitlines():
        if line == "end":
            if tickets is not None:
                tickets[rank] = (given, published)
            given, published = -1, 0
            rank += 1
            continue
        assert line != "PLAN FAILED", proc.stdout
        path, kernel, *words = line.split()
        if path == "ticket":
            assert given == -1, proc.stdout  # one kernel only
            given = int(kernel)
            continue
        if path == "published":
            published = int(kernel)
            continue
        if path == "offered":
            if offered is not None:
                offered[rank] = int(kernel)
            continue
        for direction, peer in zip(words[::2], map(int, words[1::2]), strict=True):
            assert (direction, peer) not in plans.setdefault(rank, {}), line
            plans[rank][(direction, peer)] = (path, int(kernel))
    assert rank == comm.nranks, proc.stdout
    return plans


P2P_TRANSFER_PARTS = {"packet": 8, "chunked": 16}  # kMaxP2pPacketParts, kMaxP2pChunkParts
P2P_KERNEL_PARTS = 128  # kMaxP2pParts


@pytest.mark.parametrize("nranks", [2, 9, 10, 33])
@pytest.mark.parametrize("size", [4096, 8 << 20])
def test_send_recv_kernels_pair_up(driver: Path, nranks: int, size: int) -> None:
    """Every send runs in the kernel (by launch order) that holds its receive on the peer, whatever
    the number of ranks, and no kernel holds more transfer parts than it can."""
    comm = Comm(nranks, nranks, max(1, 132 // nranks), 131072, 1024)
    plans = send_recv_plan(driver, comm, size)
    path = "chunked" if size > P2P_PACKET_MAX_BYTES else "packet"
    for rank, plan in plans.items():
        assert len(plan) == 2 * (nranks - 1), plan
        for (direction, peer), where in plan.items():
            assert where[0] == path, where
            if direction == "s":
                assert plans[peer][("r", rank)] == where, (rank, peer)
        per_kernel: dict[tuple[str, int], int] = {}
        for where in plan.values():
            per_kernel[where] = per_kernel.get(where, 0) + 1
        assert max(per_kernel.values()) * P2P_TRANSFER_PARTS[path] <= P2P_KERNEL_PARTS, per_kernel
        # No more kernels than the parts demand: each holds a send and a receive per distance it covers.
        distances_per_kernel = P2P_KERNEL_PARTS // (2 * P2P_TRANSFER_PARTS[path])
        assert len(per_kernel) == -(-(nranks - 1) // distances_per_kernel), per_kernel


@pytest.mark.parametrize("nranks", [2, 33])
@pytest.mark.parametrize("size", [4096, 8 << 20])
def test_send_recv_ticket_marks_the_last_kernel(driver: Path, nranks: int, size: int) -> None:
    """A call on another stream may wait for the ticket alone: so only the call's last kernel may publish
    it, and only a packet kernel can (the chunked ones publish none, and the call then records an event)."""
    comm = Comm(nranks, nranks, max(1, 132 // nranks), 131072, 1024)
    tickets: dict[int, tuple[int, int]] = {}
    plans = send_recv_plan(driver, comm, size, tickets)
    for rank, plan in plans.items():
        kernels = {kernel for _, kernel in plan.values()}
        if size > P2P_PACKET_MAX_BYTES:
            assert tickets[rank] == (-1, 0), (rank, tickets[rank])
        else:
            assert tickets[rank] == (max(kernels), 7), (rank, tickets[rank], kernels)


@pytest.mark.parametrize(
    ("size", "algo", "offers"),
    [
        (4096, "", False),
        (8 << 20, "", True),
        (8 << 20, "sendrecv=p2p_packet", False),
        (512 << 10, "sendrecv=p2p_chunked", False),
    ],
)
def test_send_recv_offers_only_chunked_large_sends(driver: Path, size: int, algo: str, offers: bool) -> None:
    """A send is described for its receiver to pull (which exports its buffer) only where it goes on
    chunks and is large enough to open with a descriptor: not on packets, even when forced there."""
    comm = Comm(4, 4, 33, 131072, 1024)
    offered: dict[int, int] = {}
    plans = send_recv_plan(driver, comm, size, offered=offered, algo=algo)
    for rank, plan in plans.items():
        chunked_sends = sum(
            1 for (direction, _), (path, _) in plan.items() if direction == "s" and path == "chunked"
        )
        assert offered[rank] == (chunked_sends if offers else 0), (rank, offered[rank], plan)
    assert not offers or offered[0] == comm.nranks - 1, offered


def driver_lines(driver: Path, comm: Comm, text: str, table: str = NO_TABLE) -> list[str]:
    env = driver_env()
    env["MSCCLPP_NCCL_TUNING_FILE"] = table
    proc = subprocess.run([str(driver), *comm.args()], input=text, capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("table", [NO_TABLE, str(SHIPPED)])
def test_plan_is_the_parts_it_is_made_of(driver: Path, table: str) -> None:
    """A call's one plan is the mapped path with its chunked fallback where the call maps, the window
    zero-copy kernel where both buffers lie in windows (never for PreMulSum), and the choice otherwise."""
    comm = COMMS[4]
    calls = [
        (c, size) for c in ("all_reduce", "all_gather", "reduce", "alltoall") for size in (1024, 2 << 20)
    ]
    calls += [("all_reduce", 64 << 20), ("broadcast", 8 << 20)]
    for collective, size in calls:
        for in_windows, premul in [(0, 0), (1, 0), (1, 1), (0, 1)]:
            if in_windows and collective != "all_reduce":
                continue  # only the all-reduce looks for windows
            [line] = driver_lines(driver, comm, f"plan {collective} 2 {size} {in_windows} {premul}\n", table)
            words = line.split()
            mapped, scratch_blocks, row = words[1] == "1", int(words[2]), words[4:]
            assert int(words[3]) == size, "the plan carries the bytes it was made for"
            expect_mapped = (
                not in_windows and maps(driver, comm, [f"{collective} 2 {size} {premul}"], table)[0]
            )
            assert mapped == expect_mapped, (collective, size, in_windows, premul)
            if mapped:
                [fallback] = choose(driver, comm, [f"mapped-fallback {collective} 2 {size}"], table)
                assert row[0] == fallback.algorithm and scratch_blocks == fallback.blocks
                moved = size if collective == "all_reduce" else size * comm.nranks
                shape = driver_lines(
                    driver, comm, f"mapped-shape {moved} {fallback.blocks} {fallback.threads}\n", table
                )[0].split()
                assert (int(row[1]), int(row[2])) == (int(shape[1]), int(shape[2]))
            else:
                registered = int(in_windows and not premul)
                [chosen] = choose(driver, comm, [f"{collective} 2 {size} {registered}"], table)
                assert row[0] == chosen.algorithm and int(row[1]) == chosen.blocks and row[4] == chosen.source
    [line] = driver_lines(driver, comm, "plan all_reduce 2 33554432 1 0\n", table)
    assert line.split()[4] == ZERO_COPY, "a large all-reduce in windows runs the window zero-copy kernel"


def test_every_algorithm_launches_what_it_serves(driver: Path) -> None:
    """Dispatch is a call through the registry: every algorithm that serves all_reduce or the exchanges
    has that launcher, none has a launcher for what it does not serve, and exactly the packet kernels of
    the collectives publish the call's ticket (send/recv runs its own passes)."""
    lines = driver_lines(driver, COMMS[4], "registry\n")
    assert lines[-1] == "end"
    rows = [line.split() for line in lines[:-1]]
    assert {r[0] for r in rows} >= {"allreduce_one_shot_packet", "exchange_chunked", "p2p_packet"}
    for name, all_reduce, exchange, has_all_reduce, has_exchange, publishes, protocol in rows:
        assert (all_reduce, exchange) == (has_all_reduce, has_exchange), name
        packet_collective = protocol == "0" and (all_reduce == "1" or exchange == "1")
        assert (publishes == "1") == (packet_collective or name == "p2p_packet"), name
