"""mscclpp_nccl.tune without a GPU: candidates and the MSCCLPP_NCCL_ALGO items they force, rule compression,
table merging and its exact JSON format, progress formatting, time estimates, the plot, the command's
launching, and the whole per-rank tuning loop driven against a stand-in CuPy and a stand-in NCCL whose
speed and faults depend on the forced candidate (ranks are threads; "device" memory is host memory).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import fake_nccl as fake
import numpy as np
import pytest

from mscclpp_nccl import bench as b
from mscclpp_nccl import tune as t
from mscclpp_nccl.binding import RESULT_NAMES, NcclError, ffi
from mscclpp_nccl.tune import measure as tm

ONE = "allreduce_one_shot_packet"
TWO = "allreduce_two_shot_packet"
CHUNKED = "allreduce_two_shot_chunked"

# --- candidates ----------------------------------------------------------------------------------------


def test_candidate_strings() -> None:
    c = t.Candidate("all_reduce", ONE, 8)
    assert c.spec == f"{ONE}/8"
    assert c.item == f"all_reduce={ONE}/8"
    assert c.label == "one_shot/8"
    assert t.Candidate("all_reduce", TWO).item == f"all_reduce={TWO}"
    assert t.Candidate("all_reduce", TWO).label == "two_shot"
    # A default before a given field is written 0, as the library reads it.
    assert t.Candidate("all_gather", "exchange_packet", None, 256).item == "all_gather=exchange_packet/0/256"
    assert t.Candidate("sendrecv", "p2p_packet", None, None, 4096).spec == "p2p_packet/0/0/4096"
    assert t.Candidate("broadcast", "exchange_packet", 4, 128, 8192).label == "exchange/4/128/8192"
    assert t.Candidate("all_reduce", t.STOCK).item is None
    env = t.algo_env([t.Candidate("all_reduce", ONE, 2), t.Candidate("reduce", "exchange_packet")])
    assert env == f"all_reduce={ONE}/2,reduce=exchange_packet"


def test_parse_candidate() -> None:
    assert t.parse_candidate(f"all_reduce={ONE}/8") == [t.Candidate("all_reduce", ONE, 8)]
    assert t.parse_candidate(f" {TWO}/0/256 ") == [t.Candidate("all_reduce", TWO, None, 256)]
    assert t.parse_candidate(f"{ONE}/4/512/65536") == [t.Candidate("all_reduce", ONE, 4, 512, 65536)]
    # A bare algorithm applies to every collective it serves (among those tuned).
    bare = t.parse_candidate("exchange_packet/2")
    assert [c.collective for c in bare] == [
        "all_gather",
        "reduce_scatter",
        "alltoall",
        "broadcast",
        "reduce",
        "gather",
        "scatter",
    ]
    assert {c.blocks for c in bare} == {2}
    assert [c.collective for c in t.parse_candidate("exchange_packet", ["reduce", "all_reduce"])] == [
        "reduce"
    ]
    assert t.parse_candidate("p2p_packet") == [t.Candidate("sendrecv", "p2p_packet")]
    # A named collective that is not being tuned gives nothing.
    assert t.parse_candidate(f"all_reduce={ONE}", ["all_gather"]) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("allreduce_nvls", "unknown algorithm"),
        ("all_reduce=nope", "unknown algorithm"),
        (f"allreduce={ONE}", "unknown collective"),
        (f"all_gather={ONE}", "does not serve all_gather"),
        (f"{ONE}/x", "not a non-negative integer"),
        (f"{ONE}/-1", "not a non-negative integer"),
        (f"{ONE}//512", "not a non-negative integer"),
        (f"{ONE}/1/2/3/4", "at most"),
    ],
)
def test_parse_candidate_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        t.parse_candidate(text)


def test_parse_candidate_specs() -> None:
    got = t.parse_candidate_specs(
        [f"{ONE},{TWO}/8", f"all_reduce={ONE}", "exchange_packet"], ["all_reduce", "reduce"]
    )
    assert got == {
        "all_reduce": [t.Candidate("all_reduce", ONE), t.Candidate("all_reduce", TWO, 8)],
        "reduce": [t.Candidate("reduce", "exchange_packet")],
    }


def test_block_cap() -> None:
    assert t.block_cap(132, 4) == 32  # H200, 4 ranks per GPU: 33, clamped to the library's 32
    assert t.block_cap(132, 8) == 16
    assert t.block_cap(132, 1) == 32
    assert t.block_cap(132, 500) == 1
    assert t.block_cap(0, 4) == 32  # unknown: the library clamps anyway


def test_default_candidates() -> None:
    ar = t.default_candidates("all_reduce", 32)
    grid = (1, 2, 4, 8, 16, 32)
    assert [c.spec for c in ar] == [
        spec for algo in (ONE, TWO, CHUNKED) for spec in [algo] + [f"{algo}/{n}" for n in grid]
    ]
    assert all(c.threads is None and c.chunk_bytes is None for c in ar)
    assert len(t.default_candidates("all_reduce", 16)) == 3 * 6
    assert [c.blocks for c in t.default_candidates("all_gather", 22)] == 2 * [None, 1, 2, 4, 8, 16, 22]
    assert [c.blocks for c in t.default_candidates("broadcast", 1)] == [None, 1, None, 1]
    assert [c.spec for c in t.default_candidates("sendrecv")] == ["p2p_packet", "p2p_chunked"]
    for coll in b.COLLECTIVES:
        cands = t.default_candidates(coll)
        assert cands and all(c.collective == coll and coll in t.ALGORITHMS[c.algorithm] for c in cands)
        # Every item is one the parser accepts back unchanged.
        assert [t.parse_candidate(c.item or "")[0] for c in cands] == cands


# --- winners and rules ---------------------------------------------------------------------------------


def test_pick_winner() -> None:
    order = ["a", "b", "c"]
    assert t.pick_winner({"a": 3.0, "b": 2.0, "c": 2.5}, order) == "b"
    assert t.pick_winner({"a": 2.0, "b": 2.0}, order) == "a"  # ties: the earlier candidate
    assert t.pick_winner({"a": 3.0, "b": 2.0}, order, {"b"}) == "a"
    assert t.pick_winner({"a": None, "b": float("nan")}, order) is None
    assert t.pick_winner({}, order) is None
    # The previous winner keeps the size within the tolerance, not beyond it, and not when excluded.
    assert t.pick_winner({"a": 10.0, "b": 10.2}, order, prefer="b", tolerance=0.03) == "b"
    assert t.pick_winner({"a": 10.0, "b": 10.5}, order, prefer="b", tolerance=0.03) == "a"
    assert t.pick_winner({"a": 10.0, "b": 10.2}, order, {"b"}, prefer="b", tolerance=0.03) == "a"
    assert t.pick_winner({"a": 10.0}, order, prefer="c", tolerance=0.03) == "a"


def test_compress_rules() -> None:
    one, two = t.Candidate("all_reduce", ONE, 8, 512), t.Candidate("all_reduce", TWO, 32)
    dflt = t.Candidate("all_reduce", TWO)
    points = [
        (8, one),
        (16, one),
        (65536, one),
        (131072, two),
        (262144, two),
        (1 << 20, dflt),
        (1 << 28, dflt),
    ]
    assert t.compress_rules(points) == [
        {"max_bytes": 65536, "algorithm": ONE, "blocks": 8, "threads": 512},
        {"max_bytes": 262144, "algorithm": TWO, "blocks": 32},
        {"max_bytes": None, "algorithm": TWO},  # the default shape won: no blocks/threads
    ]
    # Unordered input, a size nobody won (left to the next rule), one winner only.
    assert t.compress_rules([(1024, two), (8, one), (64, None), (256, one)]) == [
        {"max_bytes": 256, "algorithm": ONE, "blocks": 8, "threads": 512},
        {"max_bytes": None, "algorithm": TWO, "blocks": 32},
    ]
    assert t.compress_rules([(8, one), (16, one)]) == [{"max_bytes": None, **one.rule(None)}]
    assert t.compress_rules([(8, None)]) == []
    assert t.compress_rules([]) == []
    # A winner that comes back after another is a new rule (no merging across).
    rules = t.compress_rules([(8, one), (16, two), (32, one)])
    assert [r["max_bytes"] for r in rules] == [8, 16, None]
    with pytest.raises(ValueError):
        t.compress_rules([(8, one), (8, two)])
    with pytest.raises(ValueError):
        t.compress_rules([(0, one)])


def _run_doc(points: list[dict[str, Any]], cands: list[t.Candidate], **extra: Any) -> dict[str, Any]:
    coll = {
        "collective": cands[0].collective,
        "candidates": [c.to_doc() for c in cands],
        "excluded": extra.pop("excluded", {}),
        "points": points,
        "complete": extra.pop("complete", True),
    }
    doc = {"gpu": "NVIDIA H200", "nranks": 4, "ranks_per_gpu": 4, "dtype": "bfloat16", "dtype_bytes": 2}
    return {**doc, "collectives": [coll], **extra}


def _point(size: int, nbytes: int, **times: Any) -> dict[str, Any]:
    results = {}
    for spec, value in times.items():
        if isinstance(value, str):
            results[spec] = {"status": value, "time_us": None, "replays": 0}
        else:
            results[spec] = {"status": "ok", "time_us": value, "replays": 3}
    return {"size": size, "bytes": nbytes, "count": nbytes // 2, "results": results}


def test_build_entries() -> None:
    a, bb, c = (
        t.Candidate("all_reduce", ONE),
        t.Candidate("all_reduce", TWO),
        t.Candidate("all_reduce", ONE, 1),
    )
    # Specs as keyword names: map them to the spec strings.
    pts = [
        {
            "size": 8,
            "bytes": 8,
            "count": 4,
            "results": {a.spec: _r(10.0), bb.spec: _r(14.0), c.spec: _r(5.0)},
        },
        {"size": 1024, "bytes": 1024, "count": 512, "results": {a.spec: _r(11.0), bb.spec: _r(15.0)}},
        {"size": 4096, "bytes": 4096, "count": 2048, "results": {a.spec: _r(40.0), bb.spec: _r(20.0)}},
        {"size": 8192, "bytes": 8192, "count": 4096, "results": {a.spec: _r(None, "error")}},
    ]
    run = _run_doc(pts, [a, bb, c], excluded={c.spec: "wrong at 1024 B: wrong results"})
    entries, notes = t.build_entries(run)
    # c was fastest at 8 B but gave a wrong result later: never chosen.
    assert entries == [
        {
            "gpu": "NVIDIA H200",
            "nranks": 4,
            "ranks_per_gpu": 4,
            "collective": "all_reduce",
            "dtype_bytes": 2,
            "rules": [{"max_bytes": 1024, "algorithm": ONE}, {"max_bytes": None, "algorithm": TWO}],
        }
    ]
    assert any("excluded allreduce_one_shot_packet/1" in n for n in notes)
    assert any("no candidate ran correctly at 8192 B" in n for n in notes)
    unfinished = _run_doc(pts, [a, bb, c], complete=False)
    assert t.build_entries(unfinished)[0] == []
    # A run that recorded its GPU's architecture (as the tuner does) writes it into each entry, so that
    # the entry can stand in for other GPUs of that architecture.
    excluded = {c.spec: "wrong at 1024 B: wrong results"}
    [with_arch] = t.build_entries(_run_doc(pts, [a, bb, c], excluded=excluded, gpu_arch="sm_90"))[0]
    assert with_arch == {**entries[0], "arch": "sm_90"} and list(with_arch)[:2] == ["gpu", "arch"]
    t.validate_table(t.new_table([with_arch]))


def _r(value: float | None, status: str = "ok") -> dict[str, Any]:
    return {"status": status, "time_us": value, "replays": 3}


def test_noise_does_not_split_rules() -> None:
    a, bb = t.Candidate("all_reduce", TWO), t.Candidate("all_reduce", TWO, 32)
    pts = [
        {"size": s, "bytes": s, "count": s // 2, "results": {a.spec: _r(ta), bb.spec: _r(tb)}}
        for s, ta, tb in [(1024, 10.0, 10.1), (2048, 11.0, 10.9), (4096, 12.0, 11.9), (8192, 20.0, 15.0)]
    ]
    entries, _ = t.build_entries(_run_doc(pts, [a, bb]))
    # a wins 1 KB; b is 1% faster at 2 and 4 KB (noise: a keeps them), 25% faster at 8 KB.
    assert entries[0]["rules"] == [
        {"max_bytes": 4096, "algorithm": TWO},
        {"max_bytes": None, "algorithm": TWO, "blocks": 32},
    ]


def test_pruned_times_count_but_never_beat_measured() -> None:
    a, bb = t.Candidate("all_reduce", ONE), t.Candidate("all_reduce", TWO)
    pts = [{"size": 8, "bytes": 8, "count": 4, "results": {a.spec: _r(10.0), bb.spec: _r(50.0, "pruned")}}]
    entries, _ = t.build_entries(_run_doc(pts, [a, bb]))
    assert entries[0]["rules"] == [{"max_bytes": None, "algorithm": ONE}]


# --- tables ----------------------------------------------------------------------------------------------


def _entry(
    coll: str = "all_reduce", nranks: int = 4, dtype_bytes: int = 2, algo: str = ONE
) -> dict[str, Any]:
    return t.make_entry(
        "NVIDIA H200", nranks, min(4, nranks), coll, dtype_bytes, [{"max_bytes": None, "algorithm": algo}]
    )


def test_merge_tables() -> None:
    old = t.new_table([_entry(), _entry(nranks=8), _entry("all_gather", algo="exchange_packet")])
    replacement = _entry()
    replacement["rules"] = [
        {"max_bytes": 64, "algorithm": ONE, "blocks": 4},
        {"max_bytes": None, "algorithm": TWO},
    ]
    added = _entry(dtype_bytes=4)
    merged = t.merge_tables(old, [replacement, added])
    assert [t.entry_key(e) for e in merged["entries"]] == [
        t.entry_key(_entry()),
        t.entry_key(_entry(nranks=8)),
        t.entry_key(_entry("all_gather")),
        t.entry_key(added),
    ]
    assert merged["entries"][0] == replacement  # replaced in place
    assert merged["entries"][1] == old["entries"][1]  # other keys kept
    t.validate_table(merged)
    assert t.merge_tables(None, [added]) == {
        "format": "mscclpp-nccl-tuning",
        "version": 1,
        "entries": [added],
    }


def _good_table() -> dict[str, Any]:
    e = _entry()
    e["rules"] = [
        {"max_bytes": 65536, "algorithm": ONE, "blocks": 8, "threads": 512},
        {"max_bytes": None, "algorithm": TWO, "blocks": 32},
    ]
    return t.new_table([e])


def _bad(mutate: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(_good_table()))
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(extra=1),
        lambda d: d.update(format="other"),
        lambda d: d.update(version=True),
        lambda d: d.update(version=2),
        lambda d: d.pop("entries"),
        lambda d: d["entries"][0].update(root=0),
        lambda d: d["entries"][0].update(gpu=""),
        lambda d: d["entries"][0].update(arch="90"),
        lambda d: d["entries"][0].update(arch="sm_9x"),
        lambda d: d["entries"][0].update(gpu="*", arch="sm_90"),
        lambda d: d["entries"][0].update(nranks=4.0),
        lambda d: d["entries"][0].update(ranks_per_gpu=5),
        lambda d: d["entries"][0].update(collective="allreduce"),
        lambda d: d["entries"][0].update(dtype_bytes=3),
        lambda d: d["entries"][0].update(rules=[]),
        lambda d: d["entries"].append(dict(d["entries"][0])),  # a duplicate key
        lambda d: d["entries"][0]["rules"][0].update(note="x"),
        lambda d: d["entries"][0]["rules"][0].update(max_bytes=65536.0),
        lambda d: d["entries"][0]["rules"][0].update(max_bytes=None),
        lambda d: d["entries"][0]["rules"][1].update(max_bytes=1 << 20),
        lambda d: d["entries"][0]["rules"][0].update(blocks=0),
        lambda d: d["entries"][0]["rules"][0].update(threads="512"),
        lambda d: d["entries"][0]["rules"][0].update(algorithm="exchange_packet"),
        lambda d: d["entries"][0]["rules"][0].update(algorithm="nope"),
        lambda d: d["entries"][0]["rules"].insert(1, {"max_bytes": 65536, "algorithm": TWO}),
        lambda d: d["entries"][0]["rules"][0].pop("algorithm"),
    ],
)
def test_validate_table_rejects(mutate: Any) -> None:
    t.validate_table(_good_table())
    with pytest.raises(t.TableError):
        t.validate_table(_bad(mutate))


def test_written_json_matches_the_format(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "tuning.json"
    run = _run_doc(
        [
            _point(8, 8, **{ONE: 5.0, f"{ONE}/8": 4.0, TWO: 9.0}),
            _point(65536, 65536, **{ONE: 15.0, f"{ONE}/8": 14.0, TWO: 19.0}),
            _point(1 << 20, 1 << 20, **{ONE: 95.0, f"{ONE}/8": 94.0, TWO: 60.0}),
        ],
        [t.Candidate("all_reduce", ONE), t.Candidate("all_reduce", ONE, 8), t.Candidate("all_reduce", TWO)],
    )
    entries, _ = t.build_entries(run)
    t.write_table(str(path), t.merge_tables(None, entries))
    text = path.read_text()
    doc = json.loads(text)
    assert list(doc) == ["format", "version", "entries"]
    assert doc["format"] == "mscclpp-nccl-tuning" and doc["version"] == 1 and type(doc["version"]) is int
    (entry,) = doc["entries"]
    assert list(entry) == ["gpu", "nranks", "ranks_per_gpu", "collective", "dtype_bytes", "rules"]
    assert (entry["gpu"], entry["nranks"], entry["ranks_per_gpu"]) == ("NVIDIA H200", 4, 4)
    assert (entry["collective"], entry["dtype_bytes"]) == ("all_reduce", 2)
    assert entry["rules"] == [
        {"max_bytes": 65536, "algorithm": ONE, "blocks": 8},
        {"max_bytes": None, "algorithm": TWO},
    ]
    assert list(entry["rules"][0]) == ["max_bytes", "algorithm", "blocks"]
    bounds = [r["max_bytes"] for r in entry["rules"][:-1]]
    assert all(type(x) is int for x in bounds) and bounds == sorted(set(bounds))
    assert '"max_bytes": null' in text and text.endswith("\n")
    assert t.load_table(str(path)) == doc
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(t.TableError, match="not JSON"):
        t.load_table(str(tmp_path / "bad.json"))
    with pytest.raises(t.TableError):
        t.write_table(str(tmp_path / "x.json"), {"format": "mscclpp-nccl-tuning"})
    assert not (tmp_path / "x.json").exists()


# --- formatting and estimates ------------------------------------------------------------------------------


def test_formatting() -> None:
    assert [t.format_bytes(n) for n in (0, 8, 1000, 1024, 3 << 20, 1 << 30, 1536)] == [
        "0 B",
        "8 B",
        "1000 B",
        "1 KB",
        "3 MB",
        "1 GB",
        "1536 B",
    ]
    assert [t.format_us(x) for x in (3.14159, 12.345, 1234.5)] == ["3.14", "12.3", "1234"]
    assert [t.format_duration(x) for x in (4.4, 75, 3725)] == ["4 s", "1 min 15 s", "1 h 02 min"]
    assert t.format_cell("one_shot", "ok", 9.87) == "one_shot 9.87"
    assert t.format_cell("one_shot/1", "pruned", 512.0) == "one_shot/1 ~512.0"
    assert t.format_cell("two_shot", "wrong", None) == "two_shot WRONG"
    line = t.format_point_line(
        "all_reduce",
        1024,
        1024,
        [("one_shot", "ok", 10.0), ("two_shot/8", "error", None)],
        ("one_shot", 10.0),
        3,
        26,
        12.0,
        100.0,
    )
    assert line == (
        "[ 3/26] all_reduce        1 KB: one_shot 10.0 | two_shot/8 ERROR -> best one_shot 10.0 us"
        "  [12 s, ~1 min 40 s left]"
    )
    split = t.format_point_line("all_gather", 4096, 1024, [("exchange", "ok", 8.0)], None, 1, 1)
    assert split == "[1/1] all_gather        4 KB (1 KB/rank): exchange 8.00 -> no candidate ran correctly"
    rules = t.format_rules(_good_table()["entries"][0])
    assert rules == [
        "all_reduce on NVIDIA H200, 4 ranks (4 per GPU), 2-byte elements:",
        f"      <= 64 KB: {ONE} (blocks 8, threads 512)",
        f"       > 64 KB: {TWO} (blocks 32)",
    ]


def test_estimate_all_reduce_sweep_is_minutes() -> None:
    sizes = b.size_series(8, 256 << 20, 2, 0)
    ncand = len(t.default_candidates("all_reduce", 32))
    total = t.estimate_run_seconds([(ncand, sizes)], calls=10, replays=20, time_per_point=0.5)
    assert 20 < total < 600, total
    # The running estimate scales what is left by how the finished part compared with its estimate.
    assert t.remaining_estimate(100.0, 20.0, 40.0) == pytest.approx(160.0)
    assert t.remaining_estimate(100.0, 0.0, 0.0) == 100.0
    assert t.remaining_estimate(100.0, 120.0, 60.0) == 0.0


def test_replays_and_pruning() -> None:
    assert t.replays_for(0.001, 20, 0.5) == 20
    assert t.replays_for(0.1, 20, 0.5) == 5
    assert t.replays_for(2.0, 20, 0.5) == 3  # at least 3
    assert t.replays_for(2.0, 2, 0.5) == 2  # never more than asked
    assert not t.should_prune(0.01, None)  # nothing to compare with yet
    assert not t.should_prune(0.001, 100.0)  # too short to judge (launch skew)
    assert t.should_prune(0.004, 1000.0)
    assert not t.should_prune(0.004, 2000.0)


# --- options and points ------------------------------------------------------------------------------------


def test_options() -> None:
    o = t.parse_args([])
    assert o.collectives == list(b.COLLECTIVES) and o.explicit_candidates is None
    assert (o.min_bytes, o.max_bytes, o.step_factor) == (8, 256 << 20, 2)
    assert o.dtype.name == "bfloat16" and (o.replays, o.calls_per_graph) == (20, 10)
    assert o.out == "tuning.json" and o.plot is None and o.stock_lib is None
    # Explicit candidates limit the collectives to those they serve...
    o = t.parse_args(["--candidates", ONE, f"{TWO}/8"])
    assert o.collectives == ["all_reduce"]
    assert o.explicit_candidates == {
        "all_reduce": [t.Candidate("all_reduce", ONE), t.Candidate("all_reduce", TWO, 8)]
    }
    # ... and a named collective must have one.
    with pytest.raises(b.UsageError, match="no candidate serves all_gather"):
        t.parse_args(["--collectives", "all_reduce,all_gather", "--candidates", ONE])
    o = t.parse_args(
        ["--collectives", "all_reduce,sendrecv", "-b", "1K", "-e", "1M", "-f", "4", "-d", "float"]
    )
    assert o.collectives == ["all_reduce", "sendrecv"] and o.sizes() == [
        1024,
        4096,
        16384,
        65536,
        262144,
        1 << 20,
    ]
    assert o.dtype.size == 4


@pytest.mark.parametrize(
    "argv",
    [
        ["--collectives", "allreduce"],
        ["-f", "1"],
        ["-d", "float,half"],
        ["-b", "1M", "-e", "1K"],
        ["--replays", "0"],
        ["--calls-per-graph", "0"],
        ["--candidates", "nope"],
        ["--stock"],
        ["--bogus"],
    ],
)
def test_bad_options(argv: list[str]) -> None:
    with pytest.raises(b.UsageError):
        t.parse_args(argv)


def test_tuned_points() -> None:
    # all_gather at 4 ranks, bf16: 8..32 B total give 0 elements per rank; 64 B gives 16 B per rank.
    pts = t.tuned_points("all_gather", [8, 16, 32, 64, 128, 96], 2, 4)
    assert [(s, lay.count * 2) for s, lay in pts] == [(64, 16), (128, 32)]
    assert [s for s, _ in t.tuned_points("all_reduce", [8, 16], 2, 4)] == [8, 16]


def test_chunked_reference_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    dt = b.TYPE_BY_NAME["bfloat16"]
    for coll, rank in (("all_reduce", 1), ("reduce", 0), ("reduce", 2)):
        lay = b.layout(coll, 2000, dt.size, 3)
        whole, tol = b.expected_output(coll, dt, "sum", 3, rank, 0, False, lay, 77)
        monkeypatch.setattr(tm, "REFERENCE_CHUNK", 96)
        chunked, tol2 = t.reference(coll, dt, "sum", 3, rank, 0, lay, 77)
        monkeypatch.undo()
        assert tol == tol2 and np.array_equal(whole, chunked)
    got = whole.copy()
    assert t.count_mismatches(got, whole, dt, 0) == 0
    got.view("uint16")[5] ^= 1
    assert t.count_mismatches(got, whole, dt, 0) == 1


# --- the plot ----------------------------------------------------------------------------------------------


def _raw_for_plot() -> dict[str, Any]:
    a, bb = t.Candidate("all_reduce", ONE), t.Candidate("all_reduce", TWO, 8)
    ours = _run_doc(
        [
            _point(8, 8, **{a.spec: 5.0, bb.spec: 9.0}),
            _point(1 << 20, 1 << 20, **{a.spec: 95.0, bb.spec: "wrong"}),
        ],
        [a, bb],
    )
    stock = _run_doc(
        [_point(8, 8, stock=12.0), _point(1 << 20, 1 << 20, stock=40.0)], [t.Candidate("all_reduce", t.STOCK)]
    )
    return t.make_raw(ours, stock)


def test_plot_series() -> None:
    raw = _raw_for_plot()
    data = t.plot_series(raw["ours"], raw["ours"]["collectives"][0])
    assert data == {
        "sizes": [8, 1 << 20],
        "candidates": {"one_shot": [5.0, 95.0], "two_shot/8": [9.0, None]},
        "chosen": [5.0, 95.0],
        "chosen_labels": ["one_shot", "one_shot"],
    }
    assert t.stock_series(raw["stock"], "all_reduce") == ([8, 1 << 20], [12.0, 40.0])
    assert t.stock_series(None, "all_reduce") == ([], [])


def test_plot_skipped_without_matplotlib(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    path = tmp_path / "p.png"
    assert t.plot_results(_raw_for_plot(), str(path)) is False
    assert "matplotlib is not installed" in capsys.readouterr().out
    assert not path.exists()


def test_plot_writes_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.png"
    assert t.plot_results(_raw_for_plot(), str(path)) is True
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert t.plot_results(t.make_raw({"collectives": []}, None), str(tmp_path / "q.png")) is False


# --- the worker loop against stand-ins ------------------------------------------------------------------

_STREAMS: dict[int, _Stream] = {}  # thread (rank) -> its stream
_COMMS: dict[int, str] = {}  # communicator handle -> MSCCLPP_NCCL_ALGO at its init ("stock": none)
_COMMS_LOCK = threading.Lock()


def _my_stream() -> _Stream:
    return _STREAMS[threading.get_ident()]


class _Runtime(fake.HostRuntime):
    """Copies wait for the calls enqueued before them on the rank's stream, as on a GPU."""

    @staticmethod
    def memcpyAsync(dst: int, src: int, n: int, kind: int, stream: int) -> None:
        _my_stream().flush()
        fake.HostRuntime.memcpyAsync(dst, src, n, kind, stream)

    @staticmethod
    def memsetAsync(ptr: int, value: int, n: int, stream: int) -> None:
        _my_stream().flush()
        fake.HostRuntime.memsetAsync(ptr, value, n, stream)


class _Graph:
    def __init__(self, work: list[Any]) -> None:
        self.work = work

    def launch(self, stream: Any = None) -> None:
        _my_stream().pending.extend(self.work)


class _Stream:
    """Work is deferred until the stream is polled (done) or a copy is ordered after it, as on a GPU: a
    rank whose peer never calls does not block when enqueueing, only when waiting."""

    def __init__(self, non_blocking: bool = False) -> None:
        self.ptr = 0x5000
        self.work: list[Any] | None = None  # while capturing
        self.pending: list[Any] = []
        _STREAMS[threading.get_ident()] = self

    @property
    def done(self) -> bool:
        self.flush()
        return True

    def flush(self) -> None:
        while self.pending:
            self.pending.pop(0)()

    def use(self) -> _Stream:
        return self

    def begin_capture(self, mode: int | None = None) -> None:
        self.work = []

    def end_capture(self) -> _Graph:
        work, self.work = self.work or [], None
        return _Graph(work)


FAKE_CUPY = fake.fake_cupy(_Runtime, _Stream)
TYPE_BY_CODE = fake.TYPE_BY_CODE


# Every rank's virtual clock (the tuner's timing clock in these tests): a call advances it by its cost,
# so that times, pruning and winners are exact whatever the load of the machine running the tests.
_VCLOCK: dict[int, float] = {}


def _advance(seconds: float) -> None:
    me = threading.get_ident()
    _VCLOCK[me] = _VCLOCK.get(me, 0.0) + seconds


def _virtual_clock() -> float:
    return _VCLOCK.get(threading.get_ident(), 0.0)


def _seconds(item: str, nbytes: int) -> float:
    """The stand-in's speed per forced candidate: one-shot wins small sizes, two-shot large ones (~125 KB)."""
    if "two_shot_packet/2" in item:
        return 1e-5  # fastest of all, but wrong from 512 B on: must never be chosen
    if "two_shot" in item:
        return 2.5e-3 + nbytes * 1e-9
    return 1e-4 + nbytes * 2e-8


class _FakeLib(fake.FakeLibResources):
    """ncclAllReduce on host memory for one rank; ranks rendezvous through a barrier. Its behaviour comes
    from the MSCCLPP_NCCL_ALGO its communicator was created with."""

    def __init__(self, world: Any, rank: int) -> None:
        super().__init__()
        self.world, self.rank = world, rank
        self.aborted: list[int] = []
        self.calls = 0

    def ncclAllReduce(self, s: Any, r: Any, count: int, code: int, op: int, comm: Any, st: Any) -> int:
        item = _COMMS[int(ffi.cast("uintptr_t", comm))]
        dt = TYPE_BY_CODE[code]
        if "one_shot_packet/4" in item and count * dt.size >= 4096:
            return 5  # every rank refuses: the candidate errors
        if "one_shot_packet/8" in item and count * dt.size >= 32768 and self.rank == 1:
            return 5  # one rank refuses while the others' calls wait for it

        def run() -> None:
            self.calls += 1
            view = fake.view(s, count, dt).copy()
            parts = self.world.exchange(self.rank, view)
            _advance(_seconds(item, count * dt.size))
            out = b.reduce_ranks(dt, "sum", parts)[0]
            if "two_shot_packet/2" in item and count * dt.size >= 512:
                out.view(f"uint{dt.bits}")[-1] ^= 1
            fake.view(r, count, dt)[:] = out

        stream = _my_stream()
        if stream.work is not None:
            stream.work.append(run)
        else:
            stream.pending.append(run)
        return 0

    def ncclCommAbort(self, comm: Any) -> int:
        self.aborted.append(_COMMS[int(ffi.cast("uintptr_t", comm))])
        _my_stream().pending.clear()  # its waiting kernels exit
        return 0


class _FakeNccl:
    path = "/nonexistent/libnccl-stand-in.so.2"

    def __init__(self, lib: _FakeLib) -> None:
        self.lib = lib
        self.inits: list[str | None] = []

    def version(self) -> int:
        return 23203

    def get_unique_id(self) -> Any:
        return ffi.new("ncclUniqueId*")[0]

    def comm_init_rank(self, nranks: int, uid: Any, rank: int, config: Any) -> Any:
        item = os.environ.get(t.ALGO_ENV)
        self.inits.append(item)
        if item and "one_shot_packet/16" in item:
            raise NcclError(4, RESULT_NAMES[4], "bad launch shape")
        with _COMMS_LOCK:
            handle = 0x1000 + len(_COMMS)
            _COMMS[handle] = item or "stock"
        return ffi.cast("void*", handle)

    def check(self, result: int, comm: Any = None) -> int:
        if result not in (0, 7):
            raise NcclError(result, RESULT_NAMES[result], "the stand-in refused")
        return result

    def last_error(self, comm: Any = None) -> str:
        return ""

    def error_string(self, code: int) -> str:
        return RESULT_NAMES.get(code, "?")


def run_fake(argv: list[str], nranks: int) -> tuple[list[int], list[_FakeNccl]]:
    cfg = t.parse_args([*argv, "--worker", "-T", "30"])
    tm._clock = _virtual_clock  # restored by the autouse fixture
    port = fake.free_port()
    world = fake.World(nranks)
    nccls = [_FakeNccl(_FakeLib(world, r)) for r in range(nranks)]
    codes: list[int] = [-1] * nranks

    def body(r: int) -> None:
        codes[r] = t.worker_main(cfg, b.RankInfo(r, nranks, "127.0.0.1", port), FAKE_CUPY, nccls[r])

    threads = [threading.Thread(target=body, args=(r,)) for r in range(nranks)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    return codes, nccls


@pytest.fixture(autouse=True)
def _real_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tm, "_clock", tm._clock)


CANDIDATES = [ONE, TWO, f"{TWO}/2", f"{ONE}/4", f"{ONE}/8", f"{ONE}/16"]


def test_worker_tunes_and_excludes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "ours.json"
    argv = ["--collectives", "all_reduce", "-b", "8", "-e", "256K", "-f", "8", "--replays", "3"]
    argv += ["--calls-per-graph", "2", "--time-per-point", "0.01", "--results", str(results)]
    argv += ["--candidates", *CANDIDATES]
    codes, nccls = run_fake(argv, 2)
    captured = capsys.readouterr()
    assert codes == [0, 0], captured.err
    # One communicator per candidate, each created with its own forced item, and the variable restored.
    assert nccls[0].inits == [f"all_reduce={c}" for c in CANDIDATES]
    assert t.ALGO_ENV not in os.environ
    run = json.loads(results.read_text())
    assert (run["nranks"], run["ranks_per_gpu"], run["gpu"], run["dtype_bytes"]) == (2, 2, "Fake H200", 2)
    assert run["max_blocks"] == 32
    (coll,) = run["collectives"]
    assert coll["complete"] and [p["size"] for p in coll["points"]] == [8, 64, 512, 4096, 32768, 262144]
    excluded = coll["excluded"]
    assert set(excluded) == {f"{TWO}/2", f"{ONE}/4", f"{ONE}/8", f"{ONE}/16"}
    assert excluded[f"{TWO}/2"].startswith("wrong at 512 B")
    assert excluded[f"{ONE}/4"].startswith("error at 4096 B") and "ncclInvalidUsage" in excluded[f"{ONE}/4"]
    # Only rank 1 refused; rank 0's call, already enqueued, was ended by aborting the communicator.
    assert excluded[f"{ONE}/8"].startswith("error at 32768 B: rank 1: NcclError: ncclInvalidUsage")
    for nccl in nccls:
        assert nccl.lib.aborted == [f"all_reduce={ONE}/4", f"all_reduce={ONE}/8"]
    assert "communicator init failed" in excluded[f"{ONE}/16"]
    first = coll["points"][0]["results"]
    assert first[f"{TWO}/2"]["status"] == "ok"  # fastest at 8 B, before it went wrong
    assert first[ONE]["time_us"] == pytest.approx(100.16) and first[ONE]["replays"] == 3
    # Far slower than the best on 2.5 ms calls: not timed beyond its warm-up replay, and cannot win.
    assert first[TWO] == {"status": "pruned", "time_us": pytest.approx(2500.008), "replays": 0}
    last = coll["points"][-1]["results"]
    assert last[TWO]["status"] == "ok" and last[TWO]["time_us"] == pytest.approx(2500 + 262.144)
    for p in coll["points"]:
        assert p["results"][ONE]["status"] in ("ok", "pruned") and p["results"][TWO]["status"] in (
            "ok",
            "pruned",
        )
        assert f"{ONE}/16" not in p["results"]
    entries, _ = t.build_entries(run)
    assert entries == [
        t.make_entry(
            "Fake H200",
            2,
            2,
            "all_reduce",
            2,
            [{"max_bytes": 32768, "algorithm": ONE}, {"max_bytes": None, "algorithm": TWO}],
            arch="sm_90",  # the fake device's compute capability 9.0
        )
    ]
    lines = [line for line in captured.out.splitlines() if line.startswith("[")]
    assert len(lines) == 6
    assert lines[0].startswith("[1/6] all_reduce         8 B: ") and "-> best two_shot/2" in lines[0]
    assert (
        "two_shot/2 WRONG" in lines[2] and "one_shot/4 ERROR" in lines[3] and "one_shot/8 ERROR" in lines[4]
    )
    assert "-> best two_shot " in lines[5] and "left]" in lines[5]
    assert "# 1 collective(s), 6 sizes, 36 measurements: estimated" in captured.out
    assert "excluded one_shot/16: communicator init failed" in captured.out


def test_worker_stock_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "stock.json"
    argv = ["--collectives", "all_reduce", "-b", "1K", "-e", "4K", "-f", "2", "--replays", "2"]
    argv += ["--calls-per-graph", "2", "--results", str(results), "--stock", "--stock-lib", "/x/libnccl.so.2"]
    codes, nccls = run_fake(argv, 2)
    assert codes == [0, 0], capsys.readouterr().err
    assert nccls[1].inits == [None]  # a plain communicator: nothing forced
    run = json.loads(results.read_text())
    assert run["stock"] is True
    pts = run["collectives"][0]["points"]
    assert [p["size"] for p in pts] == [1024, 2048, 4096]
    assert all(p["results"]["stock"]["status"] == "ok" and p["results"]["stock"]["time_us"] > 0 for p in pts)


# --- the command -------------------------------------------------------------------------------------------


def test_main_without_gpu(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import mscclpp_nccl.run as run

    monkeypatch.setattr(run, "visible_gpus", lambda env=None: [])
    assert t.main(["--collectives", "all_reduce"]) == 2
    assert "no NVIDIA GPU" in capsys.readouterr().err
    assert t.main(["--collectives", "nope"]) == 2


def _canned_run(stock: bool) -> dict[str, Any]:
    a, bb = t.Candidate("all_reduce", ONE, 8), t.Candidate("all_reduce", TWO)
    if stock:
        return _run_doc(
            [_point(8, 8, stock=12.0), _point(1024, 1024, stock=14.0)], [t.Candidate("all_reduce", t.STOCK)]
        )
    return _run_doc(
        [_point(8, 8, **{a.spec: 5.0, bb.spec: 9.0}), _point(1024, 1024, **{a.spec: 15.0, bb.spec: 9.0})],
        [a, bb],
    )


def test_main_launches_merges_and_plots(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    import mscclpp_nccl.run as run

    launches: list[dict[str, Any]] = []

    def fake_launch(nranks: int, cmd: list[str], **kwargs: Any) -> int:
        launches.append({"nranks": nranks, "cmd": cmd, **kwargs})
        results = cmd[cmd.index("--results") + 1]
        Path(results).write_text(json.dumps(_canned_run("--stock" in cmd)))
        return 0

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(run, "visible_gpus", lambda env=None: ["0"])
    monkeypatch.setattr(run, "launch", fake_launch)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "cupy" else real_find_spec(name, *a)
    )
    for name in ("NCCL_MAX_CTAS", "MSCCLPP_NCCL_WAIT_TIMEOUT", "MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(t.ALGO_ENV, "all_reduce=allreduce_two_shot_packet")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libnccl.so.2").write_bytes(b"")
    out = tmp_path / "tuning.json"
    # An existing table: its all_reduce entry for this key is replaced, the all_gather one kept.
    other = _entry("all_gather", algo="exchange_packet")
    old_same_key = t.make_entry("NVIDIA H200", 4, 4, "all_reduce", 2, [{"max_bytes": None, "algorithm": TWO}])
    t.write_table(str(out), t.new_table([old_same_key, other]))
    argv = ["--nranks", "4", "--collectives", "all_reduce", "-e", "1K", "--out", str(out)]
    argv += ["--raw", "raw.json", "--stock-lib", "libnccl.so.2", "--plot", str(tmp_path / "t.png")]
    assert t.main(argv) == 0
    captured = capsys.readouterr()
    ours, stock = launches
    assert (
        ours["nranks"] == 4 and ours["mps"] is True and ours["prefix"] is False and ours["unique_id"] is False
    )
    cmd = ours["cmd"]
    assert cmd[1:3] == ["-m", "mscclpp_nccl.tune"] and "--worker" in cmd and "--stock" not in cmd
    assert cmd[cmd.index("--ranks-per-gpu") + 1] == "4"
    assert t.ALGO_ENV not in ours["env"] and ours["env"]["MSCCLPP_NCCL_WAIT_TIMEOUT"] == "60"
    assert t.parse_args(cmd[3:]).worker
    assert "--stock" in stock["cmd"] and stock["cmd"][-1] == str(tmp_path / "libnccl.so.2")
    assert stock["env"]["NCCL_MAX_CTAS"] == "8"  # stock NCCL needs its CTAs capped at 4 ranks per GPU
    table = t.load_table(str(out))
    assert table["entries"][1] == other
    assert table["entries"][0]["rules"] == [
        {"max_bytes": 8, "algorithm": ONE, "blocks": 8},
        {"max_bytes": None, "algorithm": TWO},
    ]
    assert "# merged into" in captured.out and "<= 8 B: allreduce_one_shot_packet (blocks 8)" in captured.out
    raw = t.load_raw(str(tmp_path / "raw.json"))
    assert raw["ours"]["collectives"][0]["points"][0]["size"] == 8 and raw["stock"] is not None
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    # --from-raw rebuilds the same table without running anything.
    launches.clear()
    fresh = tmp_path / "fresh.json"
    assert t.main(["--from-raw", str(tmp_path / "raw.json"), "--out", str(fresh)]) == 0
    assert launches == [] and t.load_table(str(fresh))["entries"] == [table["entries"][0]]
    # A table that does not follow the format is not overwritten.
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "mscclpp-nccl-tuning", "version": 1, "entries": [], "x": 1}')
    assert t.main(["--from-raw", str(tmp_path / "raw.json"), "--out", str(bad)]) == 2
    assert '"x": 1' in bad.read_text()


def test_validate_table_accepts_wildcards() -> None:
    """Wildcards the C library reads ("*" for gpu, nranks, ranks_per_gpu and dtype_bytes; dtype_bytes may
    be left out) pass, and a wildcard entry keeps its own key when a measured entry is merged in."""
    wild = _entry()
    wild.update(gpu="*", nranks="*", ranks_per_gpu="*")
    wild.pop("dtype_bytes")
    table = t.new_table([wild])
    t.validate_table(table)
    merged = t.merge_tables(table, [_entry()])
    t.validate_table(merged)
    assert [t.entry_key(e)[-1] for e in merged["entries"]] == ["*", 2]
    with pytest.raises(t.TableError):
        t.validate_table(t.new_table([{**wild, "nranks": "any"}]))
