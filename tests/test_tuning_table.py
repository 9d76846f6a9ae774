"""CPU tests of the tuning table and its JSON parser: tests/tuning_driver.cc is built once with g++ (with
AddressSanitizer and UBSan where the toolchain has them, so that "never crashes" is checked, not hoped)
and run on table files written here. No GPU or CUDA is needed."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from host_build import build_driver, driver_env

SOURCES = [
    "native/common/json.cc",
    "native/common/logging.cc",
    "native/common/env.cc",
    "native/common/parameters.cc",
    "native/algorithms/tuning_table.cc",
    "tests/tuning_driver.cc",
]
H200 = "NVIDIA H200"
ONE_SHOT = "allreduce_one_shot_packet"
TWO_SHOT = "allreduce_two_shot_packet"
EXCHANGE = "exchange_packet"
P2P = "p2p_packet"
POSITION = re.compile(r"\(line \d+, column \d+\)$")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def error(self) -> str:
        """The message of an `ERROR <message>` reply, after checking that it is one."""
        assert self.returncode == 1, f"expected a clean failure, got rc={self.returncode}\n{self.stderr}"
        assert self.stdout.startswith("ERROR "), self.stdout
        return self.stdout[len("ERROR ") :].rstrip("\n")


def _short(value: object) -> str:
    """A test id: long parameters would land in PYTEST_CURRENT_TEST and overflow the environment."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tuning") / "tuning_driver"
    # An empty document must fail cleanly; anything else means the sanitizer runtime does not work here.
    return build_driver(out, SOURCES, ["--json", os.devnull], 1)


def _run(driver: Path, args: list[str], stdin: str = "") -> Result:
    proc = subprocess.run(
        [str(driver), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=driver_env(),
        timeout=60,
        check=False,
    )
    # A signal (negative rc) or a sanitizer report means the library crashed or misbehaved.
    assert proc.returncode in (0, 1), f"driver crashed: rc={proc.returncode}\n{proc.stderr}"
    assert "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr
    return Result(proc.returncode, proc.stdout, proc.stderr)


# ---------------------------------------------------------------------------------------------------------
# Tables and lookups


def rule(max_bytes: int | None, algorithm: str, **fields: Any) -> dict[str, Any]:
    return {"max_bytes": max_bytes, "algorithm": algorithm, **fields}


def entry(
    rules: list[dict[str, Any]],
    gpu: str = "*",
    nranks: int | str = "*",
    ranks_per_gpu: int | str = "*",
    collective: str = "all_reduce",
    **fields: Any,
) -> dict[str, Any]:
    return {
        "gpu": gpu,
        "nranks": nranks,
        "ranks_per_gpu": ranks_per_gpu,
        "collective": collective,
        **fields,
        "rules": rules,
    }


def table(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"format": "mscclpp-nccl-tuning", "version": 1, "entries": list(entries)}


EXAMPLE = table(
    entry(
        [
            rule(65536, ONE_SHOT, blocks=8, threads=512),
            rule(None, TWO_SHOT, blocks=32, chunk_bytes=32768),
        ],
        gpu=H200,
        nranks=4,
        ranks_per_gpu=4,
        dtype_bytes=2,
    )
)


def _write(tmp_path: Path, doc: dict[str, Any] | str | bytes, name: str = "table.json") -> Path:
    path = tmp_path / name
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    else:
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=1), encoding="utf-8")
    return path


def lookups(
    driver: Path,
    tmp_path: Path,
    doc: dict[str, Any] | str,
    queries: list[str],
    algorithms: list[str] | None = None,
) -> list[str]:
    """Answers to `queries` ("gpu nranks ranksPerGpu collective dtypeBytes bytes"), one per query."""
    result = _run(driver, [str(_write(tmp_path, doc)), *(algorithms or [])], "\n".join(queries) + "\n")
    assert result.returncode == 0, result.stdout + result.stderr
    answers = result.stdout.splitlines()
    assert len(answers) == len(queries), answers
    for answer in answers:
        assert not answer.startswith(("MISMATCH", "BAD QUERY")), answer
    return answers


def load_error(driver: Path, tmp_path: Path, doc: dict[str, Any] | str | bytes) -> str:
    result = _run(driver, [str(_write(tmp_path, doc))])
    assert result.error.startswith("tuning table "), result.error
    assert "status 4" in result.stderr
    return result.error


def test_example_table(driver: Path, tmp_path: Path) -> None:
    answers = lookups(
        driver,
        tmp_path,
        EXAMPLE,
        [
            f"{H200} 4 4 all_reduce 2 0",
            f"{H200} 4 4 all_reduce 2 65536",
            f"{H200} 4 4 all_reduce 2 65537",
            f"{H200} 4 4 all_reduce 2 {1 << 40}",
            f"{H200} 4 4 all_reduce 4 1024",
            f"{H200} 8 4 all_reduce 2 1024",
            f"{H200} 4 2 all_reduce 2 1024",
            "NVIDIA H100 80GB HBM3 4 4 all_reduce 2 1024",
            f"{H200} 4 4 all_gather 2 1024",
        ],
    )
    assert answers == [
        f"{ONE_SHOT} 8 512 0",
        f"{ONE_SHOT} 8 512 0",
        f"{TWO_SHOT} 32 0 32768",
        f"{TWO_SHOT} 32 0 32768",
        *["none"] * 5,
    ]


def test_size_boundaries_without_a_null_rule(driver: Path, tmp_path: Path) -> None:
    doc = table(entry([rule(0, "a"), rule(8, "b"), rule(1024, "c")]))
    sizes = [0, 1, 7, 8, 9, 1023, 1024, 1025, 1 << 62]
    answers = lookups(driver, tmp_path, doc, [f"{H200} 2 1 all_reduce 4 {s}" for s in sizes], ["a", "b", "c"])
    assert answers == [
        "a 0 0 0",
        "b 0 0 0",
        "b 0 0 0",
        "b 0 0 0",
        "c 0 0 0",
        "c 0 0 0",
        "c 0 0 0",
        "none",
        "none",
    ]


def test_huge_max_bytes(driver: Path, tmp_path: Path) -> None:
    doc = table(entry([rule(2**63 - 1, P2P)], collective="sendrecv"))
    answers = lookups(driver, tmp_path, doc, [f"g 2 1 sendrecv 1 {2**63 - 1}", f"g 2 1 sendrecv 1 {2**63}"])
    assert answers == [f"{P2P} 0 0 0", "none"]


SPECIFICITY = table(
    entry([rule(None, "any")]),  # 0 non-wildcards
    entry([rule(1024, "h200_4")], gpu=H200, nranks=4),  # 2
    entry([rule(4096, "four_by_four_bf16")], nranks=4, ranks_per_gpu=4, dtype_bytes=2),  # 3
    entry([rule(None, "h200_8")], gpu=H200, nranks=8),  # 2
    entry([rule(None, "h200_4_by_1")], gpu=H200, nranks=4, ranks_per_gpu=1),  # 3
    entry([rule(None, "gather_4")], nranks=4, collective="all_gather"),  # 1, earlier of a tie
    entry([rule(None, "gather_h200")], gpu=H200, collective="all_gather"),  # 1
)
SPECIFICITY_NAMES = ["any", "h200_4", "four_by_four_bf16", "h200_8", "h200_4_by_1", "gather_4", "gather_h200"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (f"{H200} 4 4 all_reduce 2 100", "four_by_four_bf16"),  # the most specific entry wins
        (f"{H200} 4 4 all_reduce 2 4096", "four_by_four_bf16"),
        (f"{H200} 4 4 all_reduce 2 4097", "any"),  # above both 3 and 2 specific entries: fall back twice
        (f"{H200} 4 4 all_reduce 4 100", "h200_4"),  # dtype does not match the 3-specific entry
        (f"{H200} 4 4 all_reduce 4 1025", "any"),
        (f"{H200} 4 1 all_reduce 2 100", "h200_4_by_1"),
        (f"{H200} 4 1 all_reduce 2 {1 << 40}", "h200_4_by_1"),
        ("NVIDIA H100 4 4 all_reduce 2 100", "four_by_four_bf16"),  # gpu wildcard
        ("NVIDIA H100 2 1 all_reduce 8 100", "any"),
        (f"{H200} 8 8 all_reduce 1 {1 << 30}", "h200_8"),
        (f"{H200} 4 2 all_gather 2 1", "gather_4"),  # tie at specificity 1: the earlier entry
        (f"{H200} 2 2 all_gather 2 1", "gather_h200"),
        ("other 2 2 all_gather 2 1", "none"),
        (f"{H200} 4 4 broadcast 2 100", "none"),
        (f"{H200} 4 4 no_such_collective 2 100", "none"),
    ],
)
def test_specificity_and_fallback(driver: Path, tmp_path: Path, query: str, expected: str) -> None:
    [answer] = lookups(driver, tmp_path, SPECIFICITY, [query], SPECIFICITY_NAMES)
    assert answer.split()[0] == expected


H100 = "NVIDIA H100 80GB HBM3"
STAND_IN = table(
    entry([rule(1024, "h200")], gpu=H200, arch="sm_90", nranks=4),
    entry([rule(None, "any_gpu")], nranks=4),
    entry([rule(None, "h200_gather")], gpu=H200, arch="sm_90", collective="all_gather"),
    entry([rule(None, "a100")], gpu="NVIDIA A100-SXM4-80GB", arch="sm_80", nranks=4),
)
STAND_IN_NAMES = ["h200", "any_gpu", "h200_gather", "a100"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (f"sm_90 {H100} 4 4 all_reduce 2 1024", "h200"),  # no entry names the H100: the H200's answer
        (f"sm_90 {H100} 4 4 all_reduce 2 1025", "any_gpu"),  # past its rules, as on an H200
        (f"sm_90 {H100} 2 2 all_gather 2 1", "h200_gather"),
        (f"{H100} 4 4 all_reduce 2 1024", "any_gpu"),  # architecture unknown: nothing stands in
        (f"{H100} 2 2 all_gather 2 1", "none"),
        (f"sm_80 {H100} 4 4 all_reduce 2 1024", "a100"),  # another architecture's entries
        (f"sm_100 {H100} 4 4 all_reduce 2 1024", "any_gpu"),
        (f"sm_90 {H200} 4 4 all_reduce 2 1024", "h200"),
    ],
)
def test_entries_stand_in_for_a_gpu_of_their_architecture(
    driver: Path, tmp_path: Path, query: str, expected: str
) -> None:
    [answer] = lookups(driver, tmp_path, STAND_IN, [query], STAND_IN_NAMES)
    assert answer.split()[0] == expected


def test_a_gpu_named_by_one_entry_takes_no_stand_ins(driver: Path, tmp_path: Path) -> None:
    """Once the table has an entry for this GPU (tuned on it), the entries of its siblings no longer
    answer for it, even for collectives its own entries leave out."""
    doc = table(*STAND_IN["entries"], entry([rule(None, "h100_broadcast")], gpu=H100, collective="broadcast"))
    queries = [
        f"sm_90 {H100} 4 4 broadcast 2 1",
        f"sm_90 {H100} 4 4 all_reduce 2 1",
        f"sm_90 {H100} 2 2 all_gather 2 1",
    ]
    answers = lookups(driver, tmp_path, doc, queries, [*STAND_IN_NAMES, "h100_broadcast"])
    assert [a.split()[0] for a in answers] == ["h100_broadcast", "any_gpu", "none"]


def test_tie_goes_to_the_earlier_entry_in_either_order(driver: Path, tmp_path: Path) -> None:
    first = entry([rule(None, "a")], nranks=4)
    second = entry([rule(None, "b")], gpu=H200)
    query = [f"{H200} 4 4 all_reduce 2 1"]
    assert lookups(driver, tmp_path, table(first, second), query, ["a", "b"]) == ["a 0 0 0"]
    assert lookups(driver, tmp_path, table(second, first), query, ["a", "b"]) == ["b 0 0 0"]


def test_dtype_wildcard(driver: Path, tmp_path: Path) -> None:
    doc = table(
        entry([rule(None, "two")], dtype_bytes=2),
        entry([rule(None, "star")], dtype_bytes="*"),
        entry([rule(None, "absent")], collective="reduce"),
    )
    queries = [f"g 2 1 all_reduce {d} 64" for d in (1, 2, 4, 8)] + [f"g 2 1 reduce {d} 64" for d in (1, 8)]
    answers = lookups(driver, tmp_path, doc, queries, ["two", "star", "absent"])
    assert [a.split()[0] for a in answers] == ["star", "two", "star", "star", "absent", "absent"]


def test_all_collectives_and_choice_fields(driver: Path, tmp_path: Path) -> None:
    names = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "gather"]
    names += ["scatter", "sendrecv"]
    doc = table(
        *[
            entry(
                [rule(None, EXCHANGE, blocks=i + 1, threads=32 * (i + 1), chunk_bytes=8 * (i + 1))],
                collective=c,
            )
            for i, c in enumerate(names)
        ]
    )
    answers = lookups(driver, tmp_path, doc, [f"g 3 1 {c} 4 100" for c in names])
    assert answers == [f"{EXCHANGE} {i + 1} {32 * (i + 1)} {8 * (i + 1)}" for i in range(len(names))]


def test_limits_of_choice_fields_are_accepted(driver: Path, tmp_path: Path) -> None:
    doc = table(
        entry(
            [
                rule(10, EXCHANGE, blocks=1, threads=32, chunk_bytes=8),
                rule(None, EXCHANGE, blocks=1024, threads=1024, chunk_bytes=1 << 40),
            ]
        )
    )
    answers = lookups(driver, tmp_path, doc, ["g 1 1 all_reduce 1 1", "g 1 1 all_reduce 1 11"])
    assert answers == [f"{EXCHANGE} 1 32 8", f"{EXCHANGE} 1024 1024 {1 << 40}"]


def test_gpu_name_with_escapes_and_empty_table(driver: Path, tmp_path: Path) -> None:
    text = json.dumps(table(entry([rule(None, P2P)], gpu="NVIDIA H200", collective="sendrecv")))
    text = text.replace("NVIDIA H200", "NVIDIA\\u0020H\\u0032\\u00300")
    assert lookups(driver, tmp_path, text, [f"{H200} 2 1 sendrecv 2 8"]) == [f"{P2P} 0 0 0"]
    assert lookups(driver, tmp_path, table(), [f"{H200} 2 1 sendrecv 2 8"]) == ["none"]


def test_known_algorithms_come_from_the_caller(driver: Path, tmp_path: Path) -> None:
    doc = table(entry([rule(None, "my_algorithm")]))
    assert lookups(driver, tmp_path, doc, ["g 2 1 all_reduce 2 1"], ["my_algorithm"]) == [
        "my_algorithm 0 0 0"
    ]
    assert 'unknown algorithm "my_algorithm"' in load_error(driver, tmp_path, doc)


# ---------------------------------------------------------------------------------------------------------
# Validation errors: each names the problem, the entry/rule and field, and the position.


def _with(path: list[str | int], value: Any, delete: bool = False) -> dict[str, Any]:
    """EXAMPLE with the value at `path` replaced (or deleted)."""
    doc = copy.deepcopy(EXAMPLE)
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


R0 = ["entries", 0, "rules", 0]
R1 = ["entries", 0, "rules", 1]
E0 = ["entries", 0]

VALIDATION_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    (
        "unknown top field",
        _with(["entrys"], []),
        'document: unknown field "entrys" (allowed: format, version, entries)',
    ),
    ("unknown entry field", _with([*E0, "nrank"], 4), 'entries[0]: unknown field "nrank"'),
    ("unknown rule field", _with([*R1, "thread"], 64), 'entries[0].rules[1]: unknown field "thread"'),
    (
        "unknown algorithm",
        _with([*R0, "algorithm"], "allreduce_three_shot"),
        'entries[0].rules[0].algorithm: unknown algorithm "allreduce_three_shot" (known: '
        f"{ONE_SHOT}, {TWO_SHOT}, {EXCHANGE}, {P2P})",
    ),
    (
        "algorithm not a string",
        _with([*R0, "algorithm"], 3),
        "entries[0].rules[0].algorithm: unknown algorithm 3",
    ),
    (
        "missing algorithm",
        _with([*R0, "algorithm"], None, delete=True),
        'entries[0].rules[0]: missing field "algorithm"',
    ),
    (
        "missing max_bytes",
        _with([*R0, "max_bytes"], None, delete=True),
        'entries[0].rules[0]: missing field "max_bytes"',
    ),
    (
        "unsorted rules",
        _with([*E0, "rules"], [rule(4096, ONE_SHOT), rule(1024, TWO_SHOT)]),
        "entries[0].rules[1].max_bytes: rules must be sorted by strictly increasing max_bytes, "
        "but 1024 follows 4096",
    ),
    (
        "equal max_bytes",
        _with([*E0, "rules"], [rule(1024, ONE_SHOT), rule(1024, TWO_SHOT)]),
        "entries[0].rules[1].max_bytes: rules must be sorted by strictly increasing max_bytes",
    ),
    (
        "null not last",
        _with([*E0, "rules"], [rule(None, ONE_SHOT), rule(1024, TWO_SHOT)]),
        'entries[0].rules[1]: follows a rule with "max_bytes": null, which must be the last',
    ),
    ("two nulls", _with([*E0, "rules"], [rule(None, ONE_SHOT), rule(None, TWO_SHOT)]), "must be the last"),
    (
        "empty rules",
        _with([*E0, "rules"], []),
        "entries[0].rules: is empty: an entry needs at least one rule",
    ),
    ("rules not an array", _with([*E0, "rules"], {}), "entries[0].rules: expected an array, got an object"),
    ("missing rules", _with([*E0, "rules"], None, delete=True), 'entries[0]: missing field "rules"'),
    (
        "threads not a multiple",
        _with([*R0, "threads"], 100),
        "entries[0].rules[0].threads: expected a multiple of 32 from 32 to 1024, got 100",
    ),
    (
        "threads too many",
        _with([*R0, "threads"], 2048),
        "entries[0].rules[0].threads: expected a multiple of 32",
    ),
    ("threads too few", _with([*R0, "threads"], 0), "entries[0].rules[0].threads: expected a multiple of 32"),
    (
        "threads float",
        _with([*R0, "threads"], 512.0),
        "entries[0].rules[0].threads: expected a multiple of 32 from 32 to 1024, got 512.0",
    ),
    (
        "blocks zero",
        _with([*R0, "blocks"], 0),
        "entries[0].rules[0].blocks: expected an integer from 1 to 1024, got 0",
    ),
    (
        "blocks too many",
        _with([*R0, "blocks"], 1025),
        "entries[0].rules[0].blocks: expected an integer from 1 to 1024",
    ),
    (
        "blocks 1.5",
        _with([*R0, "blocks"], 1.5),
        "entries[0].rules[0].blocks: expected an integer from 1 to 1024, got 1.5",
    ),
    (
        "blocks null",
        _with([*R0, "blocks"], None),
        "entries[0].rules[0].blocks: expected an integer from 1 to 1024, got null",
    ),
    (
        "chunk not a multiple",
        _with([*R1, "chunk_bytes"], 12),
        "entries[0].rules[1].chunk_bytes: expected a positive multiple of 8, got 12",
    ),
    (
        "chunk zero",
        _with([*R1, "chunk_bytes"], 0),
        "entries[0].rules[1].chunk_bytes: expected a positive multiple of 8",
    ),
    (
        "max_bytes negative",
        _with([*R0, "max_bytes"], -1),
        "entries[0].rules[0].max_bytes: expected a non-negative integer or null, got -1",
    ),
    (
        "max_bytes string",
        _with([*R0, "max_bytes"], "64K"),
        'entries[0].rules[0].max_bytes: expected a non-negative integer or null, got "64K"',
    ),
    (
        "max_bytes too big",
        _with([*R0, "max_bytes"], 2**64),
        "entries[0].rules[0].max_bytes: expected a non-negative integer or null, got 18446744073709551616",
    ),
    (
        "rule not an object",
        _with(R0, [1024, ONE_SHOT]),
        "entries[0].rules[0]: expected an object, got an array",
    ),
    (
        "wrong format",
        _with(["format"], "nccl-tuning"),
        'format: expected "mscclpp-nccl-tuning", got "nccl-tuning"',
    ),
    ("missing format", _with(["format"], None, delete=True), 'document: missing field "format"'),
    ("wrong version", _with(["version"], 2), "version: unsupported version 2, this library reads 1"),
    ("version string", _with(["version"], "1"), 'version: unsupported version "1"'),
    ("version float", _with(["version"], 1.0), "version: unsupported version 1.0"),
    ("missing version", _with(["version"], None, delete=True), 'document: missing field "version"'),
    ("missing entries", _with(["entries"], None, delete=True), 'document: missing field "entries"'),
    ("entries not an array", _with(["entries"], {}), "entries: expected an array, got an object"),
    ("entry not an object", _with(E0, "all_reduce"), 'entries[0]: expected an object, got "all_reduce"'),
    (
        "nranks zero",
        _with([*E0, "nranks"], 0),
        'entries[0].nranks: expected a positive integer or "*", got 0',
    ),
    (
        "nranks string",
        _with([*E0, "nranks"], "4"),
        'entries[0].nranks: expected a positive integer or "*", got "4"',
    ),
    (
        "nranks too big",
        _with([*E0, "nranks"], 2**31),
        'entries[0].nranks: expected a positive integer or "*"',
    ),
    (
        "ranks_per_gpu float",
        _with([*E0, "ranks_per_gpu"], 4.5),
        'entries[0].ranks_per_gpu: expected a positive integer or "*", got 4.5',
    ),
    (
        "ranks_per_gpu above nranks",
        _with([*E0, "ranks_per_gpu"], 8),
        "entries[0].ranks_per_gpu: 8 is larger than nranks 4",
    ),
    ("missing nranks", _with([*E0, "nranks"], None, delete=True), 'entries[0]: missing field "nranks"'),
    (
        "collective",
        _with([*E0, "collective"], "allreduce"),
        "entries[0].collective: expected one of all_reduce, "
        'reduce_scatter, all_gather, alltoall, broadcast, reduce, gather, scatter, sendrecv, got "allreduce"',
    ),
    ("dtype 3", _with([*E0, "dtype_bytes"], 3), 'entries[0].dtype_bytes: expected 1, 2, 4, 8 or "*", got 3'),
    (
        "dtype 16",
        _with([*E0, "dtype_bytes"], 16),
        'entries[0].dtype_bytes: expected 1, 2, 4, 8 or "*", got 16',
    ),
    (
        "dtype string",
        _with([*E0, "dtype_bytes"], "2"),
        'entries[0].dtype_bytes: expected 1, 2, 4, 8 or "*", got "2"',
    ),
    (
        "dtype null",
        _with([*E0, "dtype_bytes"], None),
        'entries[0].dtype_bytes: expected 1, 2, 4, 8 or "*", got null',
    ),
    ("gpu empty", _with([*E0, "gpu"], ""), 'entries[0].gpu: expected a device name or "*", got ""'),
    ("arch digits alone", _with([*E0, "arch"], "90"), 'entries[0].arch: expected "sm_" and digits, got "90"'),
    ("arch number", _with([*E0, "arch"], 90), 'entries[0].arch: expected "sm_" and digits, got 90'),
    (
        "arch letters",
        _with([*E0, "arch"], "sm_9a"),
        'entries[0].arch: expected "sm_" and digits, got "sm_9a"',
    ),
    ("arch bare", _with([*E0, "arch"], "sm_"), 'entries[0].arch: expected "sm_" and digits, got "sm_"'),
    (
        "arch of any gpu",
        table(entry([rule(None, ONE_SHOT)], arch="sm_90")),
        'entries[0].arch: names the architecture of no GPU (gpu is "*")',
    ),
    ("gpu number", _with([*E0, "gpu"], 200), 'entries[0].gpu: expected a device name or "*", got 200'),
    (
        "later entry",
        table(EXAMPLE["entries"][0], entry([rule(None, "x")])),
        "entries[1].rules[0].algorithm: unknown",
    ),
]


@pytest.mark.parametrize(
    ("doc", "expected"), [c[1:] for c in VALIDATION_ERRORS], ids=[c[0] for c in VALIDATION_ERRORS]
)
def test_validation_error(driver: Path, tmp_path: Path, doc: dict[str, Any], expected: str) -> None:
    message = load_error(driver, tmp_path, doc)
    assert expected in message
    assert POSITION.search(message), message


def test_error_position_points_at_the_field(driver: Path, tmp_path: Path) -> None:
    text = json.dumps(_with([*R1, "threads"], 100), indent=1)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if '"threads": 100' in s)
    column = text.splitlines()[line - 1].index("100") + 1
    assert load_error(driver, tmp_path, text).endswith(f"(line {line}, column {column})")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"format": "mscclpp-nccl-tuning",\n "version": 1\n "entries": []}',
            "line 3, column 2: expected ',' or '}'",
        ),
        (
            '{"format": "mscclpp-nccl-tuning", "version": 1, "entries": [],}',
            "line 1, column 63: expected a string key",
        ),
        (
            '{"format": "mscclpp-nccl-tuning", "version": 1,\n "version": 1, "entries": []}',
            'line 2, column 2: duplicate key "version"',
        ),
        (
            '{"format": "mscclpp-nccl-tuning", "version": 1, "entries": [' + "[" * 100 + "]" * 100 + "]}",
            "nesting deeper than 64 levels",
        ),
        ("", "line 1, column 1: expected a value, found end of input"),
        ("[]", "document: expected an object, got an array (line 1, column 1)"),
        (
            '{"format": "mscclpp-nccl-tuning", "version": 1, "entries": []} x',
            "line 1, column 64: unexpected 'x' after the JSON value",
        ),
    ],
    ids=_short,
)
def test_bad_json_table(driver: Path, tmp_path: Path, text: str, expected: str) -> None:
    assert expected in load_error(driver, tmp_path, text)


def test_duplicate_key_in_an_entry(driver: Path, tmp_path: Path) -> None:
    text = json.dumps(EXAMPLE, indent=1).replace('"nranks": 4,', '"nranks": 4, "nranks": 8,')
    assert re.search(r'line \d+, column \d+: duplicate key "nranks"', load_error(driver, tmp_path, text))


def test_parse_from_a_string(driver: Path, tmp_path: Path) -> None:
    path = str(_write(tmp_path, EXAMPLE))
    ok = _run(driver, ["--parse", path], f"{H200} 4 4 all_reduce 2 1\n")
    assert ok.stdout == f"{ONE_SHOT} 8 512 0\n"
    bad = _run(driver, ["--parse", str(_write(tmp_path, _with([*R0, "blocks"], 0)))])
    assert bad.error.startswith(
        "tuning table: entries[0].rules[0].blocks: expected an integer from 1 to 1024"
    )


def test_file_errors_are_system_errors(driver: Path, tmp_path: Path) -> None:
    missing = _run(driver, [str(tmp_path / "nope.json")])
    assert f"cannot open tuning table {tmp_path / 'nope.json'}: No such file or directory" in missing.error
    assert "status 2" in missing.stderr
    directory = _run(driver, [str(tmp_path)])
    assert f"cannot read tuning table {tmp_path}: Is a directory" in directory.error
    assert "status 2" in directory.stderr


# The bounds a table file must keep (native/algorithms/tuning_table.cc): beyond them it is refused, with a
# message, and the selector uses its built-in rules.
MAX_TABLE_BYTES = 1 << 20
MAX_ENTRIES = 4096
MAX_RULES = 256
MAX_VALUES = 1 << 17


def test_tuning_size_file_over_the_cap_is_refused(driver: Path, tmp_path: Path) -> None:
    base = json.dumps(EXAMPLE)
    at_cap = base + " " * (MAX_TABLE_BYTES - len(base))
    assert _run(driver, [str(_write(tmp_path, at_cap))]).returncode == 0
    over = at_cap + " "
    assert f"larger than the limit of {MAX_TABLE_BYTES} bytes" in load_error(driver, tmp_path, over)
    # A 10 MB file (the size that took 170 MB and a second to load) is refused after reading 1 MiB.
    huge = base + " " * (10 << 20)
    assert f"larger than the limit of {MAX_TABLE_BYTES} bytes" in load_error(driver, tmp_path, huge)


def test_tuning_size_entries_are_bounded(driver: Path, tmp_path: Path) -> None:
    one = entry([rule(None, ONE_SHOT)])
    compact = json.dumps(table(*[one] * MAX_ENTRIES))  # inside the byte cap
    assert _run(driver, [str(_write(tmp_path, compact))]).returncode == 0
    error = load_error(driver, tmp_path, json.dumps(table(*[one] * (MAX_ENTRIES + 1))))
    assert f"entries: more than {MAX_ENTRIES} entries" in error


def test_tuning_size_rules_are_bounded(driver: Path, tmp_path: Path) -> None:
    rules = [rule(i, ONE_SHOT) for i in range(MAX_RULES)]
    assert _run(driver, [str(_write(tmp_path, table(entry(rules))))]).returncode == 0
    error = load_error(driver, tmp_path, table(entry([*rules, rule(None, ONE_SHOT)])))
    assert f"entries[0].rules: more than {MAX_RULES} rules" in error


def test_tuning_size_values_are_bounded(driver: Path, tmp_path: Path) -> None:
    """Many small values inside the byte cap (keys or numbers) are refused before they are built."""
    doc = json.dumps(EXAMPLE)[:-1] + ', "padding": [' + ",".join(["0"] * MAX_VALUES) + "]}"
    assert len(doc) < MAX_TABLE_BYTES
    assert f"more than {MAX_VALUES} values" in load_error(driver, tmp_path, doc)


def test_tuning_size_load_hands_back_the_bytes_it_parsed(driver: Path, tmp_path: Path) -> None:
    """The selector's fingerprint hashes the bytes load() read and parsed, not a second read."""
    data = json.dumps(EXAMPLE, indent=1).encode()
    result = _run(driver, ["--bytes", str(_write(tmp_path, data)), ONE_SHOT, TWO_SHOT, EXCHANGE, P2P])
    fnv = 1469598103934665603
    for byte in data:
        fnv = ((fnv ^ byte) * 1099511628211) % (1 << 64)
    assert result.stdout == f"bytes {len(data)} fnv {fnv}\n", result.stdout + result.stderr


def test_truncated_and_corrupted_tables_fail_cleanly(driver: Path, tmp_path: Path) -> None:
    text = json.dumps(EXAMPLE).encode()
    cases = [text[:n] for n in range(0, len(text), 3)]
    cases += [
        text[:n] + bytes([b]) + text[n + 1 :] for n in range(0, len(text), 7) for b in (0x00, 0x22, 0xFF)
    ]
    for i, data in enumerate(cases):
        path = _write(tmp_path, data, f"case{i}.json")
        result = _run(driver, [str(path)], f"{H200} 4 4 all_reduce 2 100\n")
        if result.returncode == 1:
            assert result.stdout.startswith("ERROR tuning table"), result.stdout


# ---------------------------------------------------------------------------------------------------------
# The JSON parser itself (tuning_driver --json prints the parsed tree back as JSON)


def parse(driver: Path, tmp_path: Path, text: str | bytes) -> Result:
    return _run(driver, ["--json", str(_write(tmp_path, text, "doc.json"))])


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types (1 is not 1.0) and the same sign of zero."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@pytest.mark.parametrize(
    "text",
    [
        r'{"escapes": "\" \\ \/ \b \f \n \r \t"}',
        r'["\u0041\u00e9\u4e2d\ud83d\ude00\u0000\u001f\uffff"]',
        '["raw UTF-8: é 中 😀"]',
        "[0, -0, 1, -1, 1e3, 1E+3, 1e-3, -1.5e2, 0.1, 1.0, -0.0, 2.5E-7, 1e-300, 1.7976931348623157e308]",
        "[9223372036854775807, -9223372036854775808, 123456789012345678]",
        " \t\r\n[ 1 ,\n 2 ]\r\n ",
        "1",
        '"just a string"',
        "null",
        "true",
        "false",
        '{"": {}, "a": [], "b": [[]], "c": [{}]}',
        '{"z": 1, "a": 2, "m": 3}',
        "[" * 64 + "]" * 64,
    ],
    ids=_short,
)
def test_json_accepts(driver: Path, tmp_path: Path, text: str) -> None:
    result = parse(driver, tmp_path, text)
    assert result.returncode == 0, result.stdout
    assert _same(json.loads(result.stdout), json.loads(text)), result.stdout


def test_json_integers_outside_int64_become_floats(driver: Path, tmp_path: Path) -> None:
    result = parse(driver, tmp_path, "[9223372036854775808, -9223372036854775809]")
    assert json.loads(result.stdout) == [9223372036854775808.0, -9223372036854775809.0]
    assert all(isinstance(x, float) for x in json.loads(result.stdout))


def test_json_byte_order_mark_is_skipped(driver: Path, tmp_path: Path) -> None:
    assert parse(driver, tmp_path, b"\xef\xbb\xbf{}").stdout == "{}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1,]", "line 1, column 4: expected a value, found ']'"),
        ('{"a":1,}', "line 1, column 8: expected a string key, found '}'"),
        ("{'a':1}", "line 1, column 2: expected a string key, found '''"),
        ('{"a" 1}', "line 1, column 6: expected ':' after the key"),
        ('{"a":1 "b":2}', "line 1, column 8: expected ',' or '}'"),
        ("[1 2]", "line 1, column 4: expected ',' or ']'"),
        ('{"a":1,"a":2}', 'line 1, column 8: duplicate key "a"'),
        ("[01]", "line 1, column 2: leading zeros are not allowed"),
        ("[-01]", "line 1, column 3: leading zeros are not allowed"),
        ("[1.]", "line 1, column 4: expected a digit after '.'"),
        ("[.5]", "line 1, column 2: expected a value, found '.'"),
        ("[+1]", "line 1, column 2: expected a value, found '+'"),
        ("[-]", "line 1, column 3: expected a digit"),
        ("[1e]", "line 1, column 4: expected a digit in the exponent"),
        ("[1e+]", "line 1, column 5: expected a digit in the exponent"),
        ("[1e400]", "line 1, column 2: number out of range"),
        ("[-1e400]", "line 1, column 2: number out of range"),
        ("[NaN]", "line 1, column 2: expected a value, found 'N'"),
        ("[Infinity]", "line 1, column 2: expected a value, found 'I'"),
        ("[tru]", "line 1, column 2: invalid literal, expected true"),
        ("[nul]", "line 1, column 2: invalid literal, expected null"),
        ("[True]", "line 1, column 2: expected a value, found 'T'"),
        ('["a\tb"]', "line 1, column 4: control character byte 0x09 in a string must be escaped"),
        ('["a\nb"]', "line 1, column 4: control character byte 0x0A in a string must be escaped"),
        (r'["\x"]', "line 1, column 3: invalid escape: backslash followed by 'x'"),
        (r'["\u12"]', "line 1, column 3: \\u must be followed by four hex digits"),
        (r'["\u12G4"]', "line 1, column 3: \\u must be followed by four hex digits"),
        (r'["\ud800"]', "line 1, column 3: unpaired surrogate in \\u escape"),
        (r'["\udc00\ud800"]', "line 1, column 3: unpaired surrogate in \\u escape"),
        (r'["\ud800\u0041"]', "line 1, column 3: unpaired surrogate in \\u escape"),
        (r'["\ud800\n"]', "line 1, column 3: unpaired surrogate in \\u escape"),
        ('"abc', "line 1, column 1: unterminated string"),
        ('["abc\\', "line 1, column 6: unterminated escape sequence"),
        ("", "line 1, column 1: expected a value, found end of input"),
        ("   ", "line 1, column 4: expected a value, found end of input"),
        ("[1", "line 1, column 3: expected ',' or ']'"),
        ('{"a":', "line 1, column 6: expected a value, found end of input"),
        ("[1] x", "line 1, column 5: unexpected 'x' after the JSON value"),
        ("[1][2]", "line 1, column 4: unexpected '[' after the JSON value"),
        ("// comment\n{}", "line 1, column 1: expected a value, found '/'"),
        ("\f[]", "line 1, column 1: expected a value, found byte 0x0C"),
        ('{\n  "a": [1,\n        2,,\n  ]\n}', "line 3, column 11: expected a value, found ','"),
        ('["é", x]', "line 1, column 7: expected a value, found 'x'"),  # columns count characters
        ("[" * 65 + "]" * 65, "line 1, column 65: nesting deeper than 64 levels"),
        ("[" * 100000, "line 1, column 65: nesting deeper than 64 levels"),
        ('{"a":' * 100000, "line 1, column 321: nesting deeper than 64 levels"),
    ],
    ids=_short,
)
def test_json_rejects(driver: Path, tmp_path: Path, text: str, expected: str) -> None:
    assert parse(driver, tmp_path, text).error == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'["\xff"]', "line 1, column 3: invalid UTF-8 in a string"),
        (b'["\xc0\xaf"]', "line 1, column 3: invalid UTF-8 in a string"),  # overlong '/'
        (b'["\xed\xa0\x80"]', "line 1, column 3: invalid UTF-8 in a string"),  # an encoded surrogate
        (b'["\xf4\x90\x80\x80"]', "line 1, column 3: invalid UTF-8 in a string"),  # past U+10FFFF
        (b'["\xe4\xb8"]', "line 1, column 3: invalid UTF-8 in a string"),  # truncated
        (b"[1]\x00", "line 1, column 4: unexpected byte 0x00 after the JSON value"),
        (b"[\xc3\xa9]", "line 1, column 2: expected a value, found byte 0xC3"),
    ],
    ids=_short,
)
def test_json_rejects_bytes(driver: Path, tmp_path: Path, data: bytes, expected: str) -> None:
    assert parse(driver, tmp_path, data).error == expected


def test_json_value_count_limit(driver: Path, tmp_path: Path) -> None:
    ok = "[" + ",".join(["0"] * ((1 << 20) - 1)) + "]"
    assert parse(driver, tmp_path, ok).returncode == 0
    too_many = "[" + ",".join(["0"] * (1 << 20)) + "]"
    assert "more than 1048576 values" in parse(driver, tmp_path, too_many).error


def test_shipped_table(driver: Path, tmp_path: Path) -> None:
    """The table the package ships parses in the C library and answers what the H200 tuning chose."""
    from mscclpp_nccl.tune import ALGORITHMS

    shipped = (
        Path(__file__).resolve().parent.parent / "mscclpp_nccl" / "tuning" / "default.json"
    ).read_text()
    answers = lookups(
        driver,
        tmp_path,
        shipped,
        [
            f"{H200} 4 4 all_reduce 2 1024",
            f"{H200} 4 4 all_reduce 2 {2 << 20}",
            f"{H200} 4 4 all_reduce 4 {(32 << 20) + 1}",
            f"{H200} 8 8 all_reduce 8 {4 << 20}",
            f"{H200} 2 2 all_reduce 1 {1 << 20}",
            f"{H200} 2 2 all_reduce 1 {(1 << 20) + 1}",
            f"{H200} 4 4 all_gather 2 {8 << 20}",
            f"{H200} 3 3 all_reduce 2 1024",
            f"{H200} 4 4 all_reduce 2 8192",
            f"{H200} 8 8 reduce 2 {512 << 10}",
            f"{H200} 2 2 broadcast 2 {2 << 20}",
            f"{H200} 4 4 reduce 2 {128 << 10}",
            f"sm_90 NVIDIA H100 80GB HBM3 4 4 all_reduce 2 {128 << 10}",  # the H200's entries stand in
            f"NVIDIA H100 80GB HBM3 4 4 all_reduce 2 {128 << 10}",
            f"sm_80 NVIDIA A100-SXM4-80GB 4 4 all_reduce 2 {128 << 10}",
        ],
        list(ALGORITHMS),
    )
    assert [a.split()[0] for a in answers] == [
        ONE_SHOT,
        TWO_SHOT,
        "allreduce_two_shot_chunked",
        "allreduce_two_shot_chunked",
        TWO_SHOT,  # packets beat the mapped path at 2 ranks up to 1 MB
        "allreduce_two_shot_chunked",
        "exchange_chunked",
        "none",
        ONE_SHOT,
        "reduce_two_shot_packet",  # the two-shot reduce at 8 ranks, 256-512 KB
        "exchange_packet",  # packets beat chunks at 2 ranks up to 2 MB broadcasts
        "exchange_packet",
        ONE_SHOT,  # one-shot up to 128 KB at 4 ranks, where the built-in rules turn two-shot at 64 KB
        "none",
        "none",
    ]
    assert answers[0].split()[1] == "0" and answers[8].split()[1] == "8"  # 8 blocks from 4 to 16 KB
    assert answers[11].split()[1] == "16"  # a grid that launches early
