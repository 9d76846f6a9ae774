"""CPU tests of the pieces of communicators over several hosts (native/fallback/DESIGN.md), through
tests/hierarchy_driver.cc: the host layout (native/fallback/hierarchy.cc), the path each layout takes
under MSCCLPP_NCCL_FALLBACK (fallback_mode.cc), the plans of hierarchical all_reduce, all_gather and
reduce_scatter, and the MSCCLPP_NCCL_HOST_ID override that cuts one machine into fake hosts
(native/transport/host_identity.cc).

Plans are checked three ways: against a pure-Python model of the steps, for exact coverage of the buffer,
and by running them on NumPy buffers (every group member must issue the same step) against the
collective's result."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from host_build import build_driver, driver_env

SOURCES = [
    "tests/hierarchy_driver.cc",
    "native/fallback/hierarchy.cc",
    "native/fallback/fallback_mode.cc",
    "native/transport/host_identity.cc",
    "native/common/env.cc",
    "native/common/parameters.cc",
    "native/common/logging.cc",
]

# Host ids in rank order.
ONE_HOST = [7, 7, 7, 7]
TWO_BY_TWO = [10, 10, 20, 20]
TWO_BY_FOUR = [1, 1, 1, 1, 2, 2, 2, 2]
FOUR_BY_TWO = [1, 1, 2, 2, 3, 3, 4, 4]
INTERLEAVED = [0xA, 0xB, 0xA, 0xB]  # ranks 0, 2 on host A; 1, 3 on host B
ROUND_ROBIN = [5, 6, 7, 8, 5, 6, 7, 8]  # 4 hosts of 2, every host's ranks 4 apart
SCATTERED = [9, 3, 3, 9, 9, 3, 3, 9]  # 2 hosts of 4 in no pattern
ONE_RANK_EACH = [1, 2, 3, 4]
IRREGULAR = [1, 1, 1, 2]
IRREGULAR_THREE = [1, 2, 2, 3, 3, 1, 1]
REGULAR = [ONE_HOST, TWO_BY_TWO, TWO_BY_FOUR, FOUR_BY_TWO, INTERLEAVED, ROUND_ROBIN, SCATTERED, ONE_RANK_EACH]

COUNTS = [*range(34), 63, 64, 65, 127, 128, 129, 1000, 1023, 4097]
ELEM_BYTES = [1, 2, 4, 8]
SIZE_MAX = 2**64 - 1


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(tmp_path_factory.mktemp("hierarchy") / "hierarchy_driver", SOURCES, [], 0)


def ask(driver: Path, queries: list[str], **env: str) -> tuple[list[list[str]], str]:
    """The driver's answer to each query (its lines), and its stderr."""
    run_env = driver_env()
    run_env.update(env)
    run = subprocess.run(
        [str(driver)],
        input="\n".join(queries) + "\n",
        capture_output=True,
        text=True,
        env=run_env,
        check=True,
    )
    answers: list[list[str]] = [[]]
    for line in run.stdout.splitlines():
        if line == "end":
            answers.append([])
        else:
            answers[-1].append(line)
    assert answers.pop() == [] and len(answers) == len(queries), run.stdout
    return answers, run.stderr


def ids(hosts: list[int]) -> str:
    return " ".join(map(str, hosts))


# The layout as native/fallback/DESIGN.md defines it, written independently of the C++.


def host_groups(hosts: list[int]) -> list[list[int]]:
    """Each host's ranks, hosts in order of their lowest rank."""
    groups: dict[int, list[int]] = {}
    for rank, host in enumerate(hosts):
        groups.setdefault(host, []).append(rank)
    return list(groups.values())


def rails(groups: list[list[int]]) -> list[list[int]]:
    """Rail i: the rank with local index i on every host that has one."""
    return [[g[local] for g in groups if len(g) > local] for local in range(max(map(len, groups)))]


def model_layout(hosts: list[int]) -> list[str]:
    groups = host_groups(hosts)
    regular = len({len(g) for g in groups}) == 1
    consecutive = all(g == list(range(g[0], g[0] + len(g))) for g in groups)
    teams = regular and consecutive
    out = [f"hosts {len(groups)} regular {int(regular)} multi {int(len(groups) > 1)} teams {int(teams)}"]
    for rank in range(len(hosts)):
        h = next(i for i, g in enumerate(groups) if rank in g)
        local = groups[h].index(rank)
        out.append(
            f"rank {rank} host {h} local {local} size {len(groups[h])} "
            f"intra {','.join(map(str, groups[h]))} rail {','.join(map(str, rails(groups)[local]))}"
        )
    return out


@pytest.mark.parametrize("hosts", [*REGULAR, IRREGULAR, IRREGULAR_THREE, [42]], ids=str)
def test_layout_matches_the_model(driver: Path, hosts: list[int]) -> None:
    (got,), _ = ask(driver, [f"layout {ids(hosts)}"])
    assert got == model_layout(hosts)


def test_layouts_written_out() -> None:
    """The model itself, on hand-worked cases, so that model and driver cannot be wrong alike."""
    assert host_groups(INTERLEAVED) == [[0, 2], [1, 3]]
    assert rails(host_groups(INTERLEAVED)) == [[0, 1], [2, 3]]
    assert rails(host_groups(TWO_BY_FOUR)) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert rails(host_groups(FOUR_BY_TWO)) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert rails(host_groups(IRREGULAR)) == [[0, 3], [1], [2]]
    assert model_layout(TWO_BY_FOUR)[0].endswith("teams 1")
    assert model_layout(INTERLEAVED)[0].endswith("teams 0")
    assert model_layout(IRREGULAR)[0].endswith("teams 0")


def test_interleaved_and_irregular_layouts_spelled_out(driver: Path) -> None:
    (interleaved, irregular), _ = ask(driver, [f"layout {ids(INTERLEAVED)}", f"layout {ids(IRREGULAR)}"])
    assert interleaved == [
        "hosts 2 regular 1 multi 1 teams 0",
        "rank 0 host 0 local 0 size 2 intra 0,2 rail 0,1",
        "rank 1 host 1 local 0 size 2 intra 1,3 rail 0,1",
        "rank 2 host 0 local 1 size 2 intra 0,2 rail 2,3",
        "rank 3 host 1 local 1 size 2 intra 1,3 rail 2,3",
    ]
    assert irregular == [
        "hosts 2 regular 0 multi 1 teams 0",
        "rank 0 host 0 local 0 size 3 intra 0,1,2 rail 0,3",
        "rank 1 host 0 local 1 size 3 intra 0,1,2 rail 1",
        "rank 2 host 0 local 2 size 3 intra 0,1,2 rail 2",
        "rank 3 host 1 local 0 size 1 intra 3 rail 0,3",
    ]


PATHS = [
    # (mode, hosts, path)
    ("-", ONE_HOST, "native"),
    ("1", ONE_HOST, "native"),
    ("0", ONE_HOST, "native"),
    ("all", ONE_HOST, "all-stock"),
    ("-", TWO_BY_TWO, "hierarchical"),
    ("1", TWO_BY_FOUR, "hierarchical"),
    ("-", FOUR_BY_TWO, "hierarchical"),
    ("-", INTERLEAVED, "hierarchical"),
    ("0", TWO_BY_TWO, "refused"),
    ("all", TWO_BY_TWO, "all-stock"),
    ("-", IRREGULAR, "all-stock"),
    ("-", IRREGULAR_THREE, "all-stock"),
    ("0", IRREGULAR, "refused"),
    ("-", ONE_RANK_EACH, "all-stock"),
    ("junk", TWO_BY_TWO, "hierarchical"),  # an invalid mode is the default
]


def test_path_for_each_mode_and_layout(driver: Path) -> None:
    answers, _ = ask(driver, [f"path {mode} {ids(hosts)}" for mode, hosts, _ in PATHS])
    got = [a[0].split(" ", 1) for a in answers]
    assert [g[0] for g in got] == [p for _, _, p in PATHS], got
    why = dict(zip([(m, str(h)) for m, h, _ in PATHS], [g[1] for g in got], strict=True))
    assert "MSCCLPP_NCCL_FALLBACK=0" in why[("0", str(TWO_BY_TWO))]
    assert "unequal numbers of ranks (3, 1)" in why[("-", str(IRREGULAR))]
    assert "unequal numbers of ranks (3, 2, 2)" in why[("-", str(IRREGULAR_THREE))]
    assert "one rank each" in why[("-", str(ONE_RANK_EACH))]


# Plans.


def model_plan(hosts: list[int], rank: int, coll: str, count: int, elem: int, grain: int) -> list[str]:
    """The driver's lines for `rank`, from the design note's description of each collective."""
    groups = host_groups(hosts)
    nranks, local_size = len(hosts), len(groups[0])
    mine = next(g for g in groups if rank in g).index(rank)
    grain = grain or elem
    steps: list[tuple[str, str, list[list[tuple[int, int]]]]] = []
    if coll == "all_reduce":
        unit = grain // elem
        slice_bytes = count // (local_size * unit) * unit * elem
        total = count * elem
        if slice_bytes:
            slices = [[(i * slice_bytes, slice_bytes)] for i in range(local_size)]
            steps.append(("intra", "reduce_scatter", slices))
            steps.append(("rail", "all_reduce", [[(mine * slice_bytes, slice_bytes)]] * len(groups)))
            steps.append(("intra", "all_gather", slices))
        rest = [(local_size * slice_bytes, total - local_size * slice_bytes)]
        if rest[0][1]:
            steps.append(("intra", "all_reduce", [rest] * local_size))
            steps.append(("rail", "all_reduce", [rest] * len(groups)))
    elif count:
        block = count * elem
        rail = [[(g[mine] * block, block)] for g in groups]
        intra = [[(g[i] * block, block) for g in groups] for i in range(local_size)]
        if coll == "all_gather":
            steps = [("rail", "all_gather", rail), ("intra", "all_gather", intra)]
        else:
            steps = [("intra", "reduce_scatter", intra), ("rail", "reduce_scatter", rail)]
    assert nranks == local_size * len(groups)
    return [
        f"rank {rank} step {k} {comm} {op} "
        + " | ".join(" ".join(f"{o}+{b}" for o, b in member) for member in members)
        for k, (comm, op, members) in enumerate(steps)
    ]


Step = tuple[str, str, tuple[tuple[tuple[int, int], ...], ...]]


def parse_plans(lines: list[str], nranks: int) -> dict[int, list[Step]]:
    plans: dict[int, list[Step]] = {r: [] for r in range(nranks)}
    for line in lines:
        words = line.split(" ", 6)
        assert words[2] == "step" and int(words[3]) == len(plans[int(words[1])]), line
        members = tuple(
            tuple((int(o), int(b)) for o, b in (r.split("+") for r in member.split()))
            for member in words[6].split(" | ")
        )
        plans[int(words[1])].append((words[4], words[5], members))
    return plans


def check_coverage(plans: dict[int, list[Step]], coll: str, total: int, grain: int) -> None:
    """The ranges of the steps that cut the buffer among a group partition it exactly."""
    for steps in plans.values():
        pieces: list[tuple[int, int]] = []
        if coll == "all_reduce":
            # The sliced part (reduce_scatter's members) and the rest (its own all_reduce) tile the buffer.
            for comm, op, members in steps:
                if op == "reduce_scatter":
                    pieces += [r for m in members for r in m]
                    assert len({b for m in members for _, b in m}) == 1, "slices differ"
                    assert members[0][0][1] % grain == 0, "a slice is no multiple of the grain"
                elif comm == "intra" and op == "all_reduce":
                    pieces += list(members[0])
        else:
            intra = next(members for comm, _, members in steps if comm == "intra")
            pieces = [r for m in intra for r in m]
        pieces.sort()
        edge = 0
        for offset, size in pieces:
            assert offset == edge and size > 0, pieces
            edge += size
        assert edge == total, (edge, total)


def simulate(hosts: list[int], plans: dict[int, list[Step]], coll: str, count: int, elem: int) -> None:
    """Runs the plans on NumPy buffers, one value a byte and sum as the reduction, and checks the result.
    Bytes a step leaves undefined become NaN, so a later step that reads them spoils the result."""
    groups = host_groups(hosts)
    nranks, block = len(hosts), count * elem
    total = block if coll == "all_reduce" else nranks * block
    rng = np.random.default_rng(count * 131 + elem)
    start = rng.integers(0, 1000, size=(nranks, total)).astype(np.float64)
    buf = start.copy()
    if coll == "all_gather":
        for r in range(nranks):
            buf[r, :] = np.nan
            buf[r, r * block : (r + 1) * block] = start[r, r * block : (r + 1) * block]
    assert len({len(s) for s in plans.values()}) == 1, "ranks run different numbers of steps"
    for k in range(len(plans[0])):
        comm = plans[0][k][0]
        for group in groups if comm == "intra" else rails(groups):
            step = plans[group[0]][k]
            assert all(plans[r][k] == step for r in group), f"step {k} differs within {group}"
            assert step[0] == comm and len(step[2]) == len(group)
            run_step(buf, group, step[1], step[2])
    if coll == "all_reduce":
        expected = np.broadcast_to(start.sum(axis=0), buf.shape)
        assert np.array_equal(buf, expected)
    elif coll == "all_gather":
        own = np.concatenate([start[r, r * block : (r + 1) * block] for r in range(nranks)])
        assert np.array_equal(buf, np.broadcast_to(own, buf.shape))
    else:
        for r in range(nranks):
            window = slice(r * block, (r + 1) * block)
            assert np.array_equal(buf[r, window], start[:, window].sum(axis=0)), f"rank {r}"


def run_step(buf: np.ndarray, group: list[int], op: str, members: tuple) -> None:
    cuts = [[slice(o, o + b) for o, b in m] for m in members]
    for member in cuts:
        for s in member:
            assert s.start >= 0 and s.stop <= buf.shape[1]
    if op == "all_reduce":
        for s in cuts[0]:
            total = buf[group, s].sum(axis=0)
            assert not np.isnan(total).any(), "all_reduce of undefined bytes"
            buf[group, s] = total
    elif op == "reduce_scatter":
        owned = [[buf[group, s].sum(axis=0) for s in member] for member in cuts]
        for member in cuts:
            for s in member:
                buf[group, s] = np.nan
        for rank, member, values in zip(group, cuts, owned, strict=True):
            for s, value in zip(member, values, strict=True):
                buf[rank, s] = value
    else:
        for rank, member in zip(group, cuts, strict=True):
            for s in member:
                assert not np.isnan(buf[rank, s]).any(), "all_gather of undefined bytes"
                buf[group, s] = buf[rank, s]


PLAN_LAYOUTS = [
    TWO_BY_TWO,
    TWO_BY_FOUR,
    FOUR_BY_TWO,
    INTERLEAVED,
    ROUND_ROBIN,
    SCATTERED,
    ONE_HOST,
    ONE_RANK_EACH,
]


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("hosts", PLAN_LAYOUTS, ids=str)
def test_plans_match_the_model_cover_the_buffer_and_compute_the_collective(
    driver: Path, hosts: list[int], coll: str
) -> None:
    cases = [
        (count, elem, grain)
        for count in COUNTS
        for elem in ELEM_BYTES
        for grain in ([0, 16] if coll == "all_reduce" else [0])
    ]
    answers, _ = ask(driver, [f"plan {coll} {c} {e} {g} {ids(hosts)}" for c, e, g in cases])
    for (count, elem, grain), lines in zip(cases, answers, strict=True):
        context = f"{coll} count {count} elem {elem} grain {grain}"
        expected = [
            line for rank in range(len(hosts)) for line in model_plan(hosts, rank, coll, count, elem, grain)
        ]
        assert lines == expected, context
        plans = parse_plans(lines, len(hosts))
        total = count * elem * (1 if coll == "all_reduce" else len(hosts))
        if count:
            check_coverage(plans, coll, total, grain or elem)
        else:
            assert lines == [], context
        simulate(hosts, plans, coll, count, elem)


def test_the_simulation_rejects_broken_plans(driver: Path) -> None:
    """The NumPy check is an oracle of its own: a plan without its rail steps, one whose rails all reduce
    the same slice, or one whose members disagree about a step must fail it."""
    (lines,), _ = ask(driver, [f"plan all_reduce 64 4 0 {ids(INTERLEAVED)}"])
    plans = parse_plans(lines, 4)
    simulate(INTERLEAVED, plans, "all_reduce", 64, 4)
    no_rail = {r: [s for s in steps if s[0] != "rail"] for r, steps in plans.items()}
    # Every rail reduces slice 0: rail 1's slice is never summed across hosts.
    slice0 = plans[0][1]
    assert slice0[:2] == ("rail", "all_reduce")
    same_slice = {r: [slice0 if s[0] == "rail" else s for s in steps] for r, steps in plans.items()}
    # Rank 2 disagrees with rank 0, its host's other member, about the first step.
    uneven = {r: list(steps) for r, steps in plans.items()}
    uneven[2][0] = ("intra", "reduce_scatter", ((plans[2][0][2][0][0],), ()))
    for broken in (no_rail, same_slice):
        with pytest.raises(AssertionError):
            simulate(INTERLEAVED, broken, "all_reduce", 64, 4)
    with pytest.raises(AssertionError, match="differs within"):
        simulate(INTERLEAVED, uneven, "all_reduce", 64, 4)


def test_all_reduce_slices_are_equal_and_the_rest_small(driver: Path) -> None:
    """Count 10 of 4-byte elements over 2 hosts of 4 in 16-byte grains: 4 slices of 0 grains, so all of it
    is the rest; count 100: slices of 6 grains (24 elements), 4 elements left."""
    (small, large), _ = ask(driver, [f"plan all_reduce {c} 4 16 {ids(TWO_BY_FOUR)}" for c in (10, 100)])
    assert small[:2] == [
        "rank 0 step 0 intra all_reduce " + " | ".join(["0+40"] * 4),
        "rank 0 step 1 rail all_reduce 0+40 | 0+40",
    ]
    assert large[0] == "rank 0 step 0 intra reduce_scatter 0+96 | 96+96 | 192+96 | 288+96"
    assert large[3] == "rank 0 step 3 intra all_reduce " + " | ".join(["384+16"] * 4)


@pytest.mark.parametrize(
    ("query", "why"),
    [
        (f"plan all_reduce 8 4 0 {ids(IRREGULAR)}", "irregular layout"),
        (f"plan all_gather 8 4 0 {ids(IRREGULAR_THREE)}", "irregular layout"),
        (f"plan all_reduce 8 4 6 {ids(TWO_BY_TWO)}", "grain not a multiple of the element"),
        (f"plan all_reduce 8 0 0 {ids(TWO_BY_TWO)}", "zero-byte elements"),
        (f"plan all_reduce {SIZE_MAX // 2} 4 0 {ids(TWO_BY_TWO)}", "bytes overflow"),
        (f"plan all_gather {SIZE_MAX // 2 // 4 + 1} 2 0 {ids(TWO_BY_TWO)}", "the whole buffer overflows"),
    ],
)
def test_no_plan(driver: Path, query: str, why: str) -> None:
    (lines,), _ = ask(driver, [query])
    nranks = len(query.split()) - 5
    assert lines == [f"rank {r} none" for r in range(nranks)], why


def test_largest_count_that_fits_still_plans(driver: Path) -> None:
    (lines,), _ = ask(driver, [f"plan all_gather {SIZE_MAX // 2 // 4} 2 0 {ids(TWO_BY_TWO)}"])
    assert len(lines) == 8 and "none" not in lines[0]


# MSCCLPP_NCCL_FALLBACK.


@pytest.mark.parametrize(
    ("value", "mode", "warned"),
    [
        (None, "1", False),
        ("", "1", False),
        ("1", "1", False),
        ("0", "0", False),
        ("all", "all", False),
        ("ALL", "all", False),
        ("2", "1", True),
        ("off", "1", True),
        ("0 ", "1", True),
        ("al", "1", True),
    ],
)
def test_fallback_variable(driver: Path, value: str | None, mode: str, warned: bool) -> None:
    env = {"NCCL_DEBUG": "WARN"}
    if value is not None:
        env["MSCCLPP_NCCL_FALLBACK"] = value
    ((got,), stderr) = ask(driver, ["mode"], **env)
    assert got == [mode]
    assert ("ignoring MSCCLPP_NCCL_FALLBACK" in stderr) == warned, stderr


# MSCCLPP_NCCL_HOST_ID.


def test_host_id_unset_is_the_physical_host(driver: Path) -> None:
    (physical, unset), _ = ask(driver, ["physical", "hostid 12345"])
    first, second = physical[0].split()
    assert first == second and int(first) != 0
    assert unset == ["12345"]
    (empty,), _ = ask(driver, ["hostid 12345"], MSCCLPP_NCCL_HOST_ID="")
    assert empty == ["12345"]


def test_host_id_override_splits_a_machine_but_never_joins_two(driver: Path) -> None:
    (a, a_again, b, other_machine_a, from_env), _ = ask(
        driver, ["hostid 1 A", "hostid 1 A", "hostid 1 B", "hostid 2 A", "hostid 1"], MSCCLPP_NCCL_HOST_ID="A"
    )
    assert a == a_again == from_env
    assert len({a[0], b[0], other_machine_a[0], "1", "2"}) == 5


def test_stock_sees_the_layout_hosts(driver: Path) -> None:
    """Stock gets NCCL_HOSTID only where the layout split the machine: one name per fake host, the same
    for the ranks of one, and none for a physical host (stock finds that itself)."""
    queries = [f"hostid 77 {n}" for n in "AAB"]
    (a1, a2, b), _ = ask(driver, queries)
    answers, _ = ask(driver, [f"stockhost 77 {h[0]}" for h in (a1, a2, b)] + ["stockhost 77 77"])
    names = [answer[0] for answer in answers]
    assert names[0] == names[1] != names[2]
    assert all(name.startswith("mscclpp-nccl-host-") for name in names[:3])
    assert names[3] == "-"


@pytest.mark.parametrize(
    ("names", "shape"),
    [("AABB", (2, 2)), ("ABAB", (2, 2)), ("AAAABBBB", (2, 4)), ("AABBCCDD", (4, 2)), ("ABCDABCD", (4, 2))],
)
def test_fake_hosts_on_one_machine(driver: Path, names: str, shape: tuple[int, int]) -> None:
    """Ranks of one machine, each with its MSCCLPP_NCCL_HOST_ID, form the layouts the GPU tests will use."""
    answers, _ = ask(driver, [f"hostid 77 {n}" for n in names])
    hosts = [int(a[0]) for a in answers]
    (layout,), _ = ask(driver, [f"layout {ids(hosts)}"])
    consecutive = names == "".join(sorted(names))
    assert layout[0] == f"hosts {shape[0]} regular 1 multi 1 teams {int(consecutive)}"
    assert layout[1:] == model_layout([ord(n) for n in names])[1:]
