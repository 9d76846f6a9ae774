"""mscclpp_nccl.selection, the Python mirror of the library's selector that `info --table` shows, against
the C++ selector itself (tests/selector_driver.cc, as tests/test_selector.py builds it): the same
algorithm, source and mapped path for every collective, size and layout, with the shipped table, a table
of wildcards, and none. Also `python -m mscclpp_nccl info --table` itself (CPU only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from host_build import REPO, build_driver, driver_env
from stock_nccl import require_cuda_include
from test_selector import SOURCES

from mscclpp_nccl import selection as sel
from mscclpp_nccl.bench.collectives import COLLECTIVES

SHIPPED = REPO / "mscclpp_nccl" / "tuning" / "default.json"
NO_TABLE = "/nonexistent/tuning.json"
H200 = "NVIDIA H200"
H100 = "NVIDIA H100 80GB HBM3"
# (nranks, ranks per GPU, resident blocks, chunk slot bytes, slot packets) as communicators derive them.
LAYOUTS = [
    (2, 2, 44, 131072, 4096),
    (4, 4, 22, 126976, 2048),
    (8, 8, 11, 131072, 1024),
    (8, 1, 132, 131072, 4096),
]
SIZES = [1 << k for k in range(3, 29)] + [3 << 20, 96 << 10]
WILDCARDS = {
    "format": "mscclpp-nccl-tuning",
    "version": 1,
    "entries": [
        {
            "gpu": "*",
            "nranks": "*",
            "ranks_per_gpu": "*",
            "collective": "all_gather",
            "rules": [
                {"max_bytes": 4096, "algorithm": "exchange_chunked", "blocks": 2},
                {"max_bytes": None, "algorithm": "exchange_packet"},
            ],
        },
        {
            "gpu": H200,
            "nranks": 8,
            "ranks_per_gpu": 1,
            "collective": "all_reduce",
            "dtype_bytes": 2,
            "rules": [{"max_bytes": None, "algorithm": "allreduce_two_shot_chunked", "chunk_bytes": 65536}],
        },
    ],
}


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("selection") / "selector_driver"
    args = [H200, *map(str, LAYOUTS[1])]
    return build_driver(out, SOURCES, args, 0, [require_cuda_include()])


def ask_driver(
    driver: Path, gpu: str, layout: tuple[int, ...], table: str, queries: list[str]
) -> list[list[str]]:
    """The driver's answer to each query line, as words, with `table` as the tuning file."""
    env = driver_env() | {"MSCCLPP_NCCL_TUNING_FILE": table}
    proc = subprocess.run(
        [str(driver), gpu, *map(str, layout)],
        input="".join(f"{q}\n" for q in queries),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert len(rows) == len(queries), proc.stdout
    return rows


def cpp_plans(
    driver: Path,
    layout: tuple[int, ...],
    table: str,
    queries: list[tuple[str, int, int]],
    gpu: str = H200,
) -> list[tuple[str, str, bool]]:
    rows = ask_driver(driver, gpu, layout, table, [f"plan {c} {e} {b} 0 0" for c, e, b in queries])
    # plan MAPPED SCRATCH_BLOCKS BYTES algorithm blocks threads chunkBytes source early
    return [(r[4], r[8], r[1] == "1") for r in rows]


@pytest.mark.parametrize("table", ["shipped", "wildcards", "none"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=[f"{n}ranks-{rpg}pergpu" for n, rpg, *_ in LAYOUTS])
def test_python_plans_match_the_library(
    driver: Path, tmp_path: Path, table: str, layout: tuple[int, ...]
) -> None:
    path = {"shipped": str(SHIPPED), "none": NO_TABLE}.get(table, str(tmp_path / "t.json"))
    if table == "wildcards":
        Path(path).write_text(json.dumps(WILDCARDS))
    doc = json.loads(Path(path).read_text()) if Path(path).exists() else None
    where = sel.Layout(H200, layout[0], layout[1])
    entries = sel.applicable_entries(doc, where)
    queries = [(c, e, b) for c in COLLECTIVES for e in (1, 2, 4) for b in SIZES]
    expected = cpp_plans(driver, layout, path, queries)
    got = [
        (p.algorithm, p.source, p.mapped) for p in (sel.plan(entries, where, c, e, b) for c, e, b in queries)
    ]
    mismatches = [(q, g, x) for q, g, x in zip(queries, got, expected, strict=True) if g != x]
    assert not mismatches, mismatches[:10]


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", ""])
def test_python_and_library_agree_on_stand_in_entries(driver: Path, arch: str) -> None:
    """An H100 takes the shipped H200 entries where its architecture is sm_90, and the built-in rules
    otherwise, in the library and in its Python mirror alike."""
    layout = LAYOUTS[1]
    where = sel.Layout(H100, layout[0], layout[1], arch)
    entries = sel.applicable_entries(json.loads(SHIPPED.read_text()), where)
    assert bool(entries) == (arch == "sm_90")
    queries = [(c, 2, b) for c in COLLECTIVES for b in SIZES]
    gpu = f"{H100}@{arch}" if arch else H100
    expected = cpp_plans(driver, layout, str(SHIPPED), queries, gpu)
    got = [
        (p.algorithm, p.source, p.mapped) for p in (sel.plan(entries, where, c, e, b) for c, e, b in queries)
    ]
    assert got == expected
    on_h200 = cpp_plans(driver, layout, str(SHIPPED), queries)
    assert (got == on_h200) == (arch == "sm_90")


def test_table_shape_fields_are_reported() -> None:
    where = sel.Layout(H200, 8, 1)
    entries = sel.applicable_entries(WILDCARDS, where)
    plan = sel.plan(entries, where, "all_gather", 4, 1024)
    assert plan == sel.Plan("exchange_chunked", "table", {"blocks": 2})
    assert plan.describe() == "exchange_chunked (blocks 2) [table]"
    # The more specific entry answers for 2-byte all-reduces; other element sizes fall to the rules.
    assert sel.plan(entries, where, "all_reduce", 2, 4096).shape == {"chunk_bytes": 65536}
    assert sel.plan(entries, where, "all_reduce", 4, 4096).source == "rules"
    assert (
        sel.plan(entries, where, "all_reduce", 4, 8 << 20)
        .describe()
        .startswith("zero-copy on mapped buffers")
    )


def info(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MSCCLPP_NCCL_")}
    full |= {"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mscclpp_nccl", "info", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


def test_info_table_shows_choices_and_their_source() -> None:
    r = info("--table", "--nranks", "4", "--gpu", H200, "-d", "bfloat16")
    assert r.returncode in (0, 1), r.stderr  # 1: the library is not built here
    out = r.stdout
    assert f"table:     the shipped table {SHIPPED}" in out
    assert "entries apply to NVIDIA H200, 4 ranks, 4 per GPU" in out
    lines = out.splitlines()
    start = lines.index("  all_reduce")
    assert lines[start + 1].split()[0] == "8-2K" and lines[start + 1].endswith("[table]")
    assert all(f"  {c}" in lines for c in COLLECTIVES)


def test_info_table_says_when_no_entry_fits() -> None:
    r = info("--table", "--nranks", "8", "--ranks-per-gpu", "1", "--gpu", "NVIDIA H100 80GB HBM3")
    assert "no entry fits this machine and layout: the built-in rules choose everything" in r.stdout
    assert "[table]" not in r.stdout and "[rules]" in r.stdout


def test_info_table_says_which_gpu_s_entries_stand_in() -> None:
    r = info("--table", "--nranks", "4", "--gpu", H100, "--arch", "sm_90", "-d", "bfloat16")
    assert f"entries apply to {H100}, 4 ranks, 4 per GPU" in r.stdout
    assert "(entries for NVIDIA H200, of its architecture sm_90)" in r.stdout
    assert "[table]" in r.stdout


def test_info_table_with_a_missing_table_file(tmp_path: Path) -> None:
    r = info("--table", "--gpu", H200, env={"MSCCLPP_NCCL_TUNING_FILE": str(tmp_path / "none.json")})
    assert "does not exist: the built-in rules choose everything" in r.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--nranks", "4"], "go with --table"),
        (["--table", "--nranks", "0"], "at least 1"),
        (["--table", "-N", "4"], "give --nranks"),
        (["--table", "--nranks", "2", "--ranks-per-gpu", "4"], "more than the 2 ranks"),
        (["--table", "-d", "all"], "one type"),
        (["--table", "-d", "nosuch"], "unknown data type"),
    ],
)
def test_info_table_bad_input(args: list[str], says: str) -> None:
    r = info(*args)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_the_library_says_once_when_no_entry_fits(driver: Path) -> None:
    """At init with NCCL_DEBUG=WARN, a table with no entry for this GPU and layout is named, once. The
    shipped table covers one H200 with every rank on it: not 8 GPUs of one rank each."""
    env = driver_env() | {"MSCCLPP_NCCL_TUNING_FILE": str(SHIPPED), "NCCL_DEBUG": "WARN"}
    for gpu, rpg, expected in [
        (H100, 1, True),
        (H200, 1, True),
        (H200, 8, False),
        (f"{H100}@sm_90", 1, True),
        (f"{H100}@sm_90", 8, False),  # the H200's entries stand in
    ]:
        proc = subprocess.run(
            [str(driver), gpu, "8", str(rpg), "132", "131072", "4096"],
            input="",
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        said = [line for line in proc.stderr.splitlines() if "has no entry for" in line]
        assert len(said) == (1 if expected else 0), proc.stderr
        if expected:
            name, _, arch = gpu.partition("@")
            described = f"{name} ({arch})" if arch else name
            assert f"{SHIPPED} has no entry for {described}, 8 ranks, {rpg} per GPU" in said[0]
            assert "NCCL WARN" in said[0]
