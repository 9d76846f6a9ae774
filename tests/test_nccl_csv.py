"""The tuning table to and from NCCL's tuner-plugin CSV (mscclpp_nccl.tune.nccl_csv, and `python -m
mscclpp_nccl table export-csv|import-csv`), where the meanings map. CPU only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mscclpp_nccl import selection as sel
from mscclpp_nccl.tune.nccl_csv import SIZE_MAX, CsvError, export_csv, import_csv
from mscclpp_nccl.tune.table import validate_table

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "mscclpp_nccl" / "tuning" / "default.json"
TABLE = {
    "format": "mscclpp-nccl-tuning",
    "version": 1,
    "entries": [
        {
            "gpu": "NVIDIA H200",
            "nranks": 4,
            "ranks_per_gpu": 4,
            "collective": "all_reduce",
            "dtype_bytes": 2,
            "rules": [
                {"max_bytes": 65536, "algorithm": "allreduce_one_shot_packet", "blocks": 8},
                {"max_bytes": None, "algorithm": "allreduce_two_shot_chunked", "chunk_bytes": 65536},
            ],
        },
        {
            "gpu": "*",
            "nranks": 8,
            "ranks_per_gpu": "*",
            "collective": "all_gather",
            "rules": [
                {"max_bytes": 1024, "algorithm": "exchange_packet"},
                {"max_bytes": None, "algorithm": "exchange_chunked"},
            ],
        },
        {
            "gpu": "*",
            "nranks": "*",
            "ranks_per_gpu": "*",
            "collective": "reduce_scatter",
            "rules": [{"max_bytes": None, "algorithm": "exchange_packet"}],
        },
        {
            "gpu": "*",
            "nranks": 4,
            "ranks_per_gpu": "*",
            "collective": "alltoall",
            "rules": [{"max_bytes": None, "algorithm": "exchange_chunked"}],
        },
    ],
}


def rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_export_where_the_meanings_map() -> None:
    text, notes = export_csv(TABLE)
    assert (
        text.splitlines()[1]
        == "# collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff"
    )
    assert "# gpu NVIDIA H200, ranks_per_gpu 4, dtype_bytes 2" in text  # what the CSV cannot say
    assert rows(text) == [
        "allreduce,0,65536,ring,ll,8,1,4,-1,-1",  # packets are LL, blocks are channels
        f"allreduce,65537,{SIZE_MAX},ring,simple,-1,1,4,-1,-1",
        "allgather,0,8192,ring,ll,-1,1,8,-1,-1",  # NCCL counts all 8 ranks' bytes
        f"allgather,8193,{SIZE_MAX},ring,simple,-1,1,8,-1,-1",
    ]
    assert len(notes) == 2
    assert "bytes per rank cannot become NCCL's totals for any number of ranks" in notes[0]
    assert "NCCL's tuner has no alltoall" in notes[1]


def test_import_fills_gaps_with_the_built_in_rules() -> None:
    csv_text = "\n".join(
        [
            "# from NCCL's example",
            "allreduce,0,4096,tree,ll,4,1,-1",
            "allreduce,4096,8192,ring,ll128,-1,1,-1,-1,-1",  # overlaps: the line starting first wins
            "allreduce,16384,1048576,ring,simple,16,1,-1,-1,0",  # gap 8193-16383: built-in rules
            "allgather,0,65536,ring,simple,-1,1,8,-1,-1",  # totals of 8 ranks: 8 KiB per rank
            "allreduce,0,1000,ring,ll,-1,2,-1",  # two nodes: stock NCCL's business
            "alltoall,0,1000,ring,ll,-1,1,-1",  # not in NCCL's tuner, nor ours to take
            "allgather,0,100,ring,ll,-1,1,-1",  # totals for any number of ranks
        ]
    )
    table, notes = import_csv(csv_text)
    validate_table(table)
    by_coll = {e["collective"]: e for e in table["entries"]}
    assert by_coll["all_reduce"]["nranks"] == "*" and by_coll["all_reduce"]["gpu"] == "*"
    assert by_coll["all_reduce"]["rules"] == [
        {"max_bytes": 4096, "algorithm": "allreduce_one_shot_packet", "blocks": 4},
        {"max_bytes": 16383, "algorithm": "allreduce_one_shot_packet"},  # 4097-8192 LL, then the rules
        {"max_bytes": 1048576, "algorithm": "allreduce_two_shot_chunked", "blocks": 16},
        {"max_bytes": None, "algorithm": "allreduce_two_shot_chunked"},  # the rules past the CSV
    ]
    assert by_coll["all_gather"]["nranks"] == 8
    assert by_coll["all_gather"]["rules"][0] == {"max_bytes": 8192, "algorithm": "exchange_chunked"}
    assert by_coll["all_gather"]["rules"][-1]["max_bytes"] is None
    assert len(notes) == 3 and "2 nodes" in notes[0] and "alltoall" in notes[1] and "any nRanks" in notes[2]


def test_a_round_trip_keeps_the_protocol_at_every_size() -> None:
    table = json.loads(SHIPPED.read_text())
    text, _ = export_csv(table)
    back, _ = import_csv(text)
    again, _ = export_csv(back)
    for size in sel.sizes(8, 1 << 30):
        for collective in ("allreduce", "broadcast", "reduce"):
            for nranks in ("2", "4", "8"):
                first = [r for r in rows(text) if r.split(",")[0] == collective and r.split(",")[7] == nranks]
                second = [
                    r for r in rows(again) if r.split(",")[0] == collective and r.split(",")[7] == nranks
                ]

                def protocol(lines: list[str], size: int = size) -> str | None:
                    hits = [
                        r.split(",")[4] for r in lines if int(r.split(",")[1]) <= size <= int(r.split(",")[2])
                    ]
                    return hits[0] if hits else None

                if protocol(first) is not None:
                    assert protocol(second) == protocol(first), (collective, nranks, size)


def test_imported_tables_follow_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "mscclpp_nccl" / "tuning" / "table.schema.json").read_text())
    table, _ = import_csv(export_csv(json.loads(SHIPPED.read_text()))[0])
    jsonschema.validate(table, schema)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("allreduce,0,10,ring,ll", "5 fields"),
        ("allreduce,x,10,ring,ll,-1,1,-1", "min_bytes is not an integer"),
        ("allreduce,0,10,ring,fast,-1,1,-1", "protocol 'fast'"),
        ("allreduce,10,0,ring,ll,-1,1,-1", "no range"),
    ],
)
def test_bad_csv_is_refused_by_line(text: str, says: str) -> None:
    with pytest.raises(CsvError, match=says):
        import_csv(text)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSCCLPP_NCCL_")} | {
        "PYTHONPATH": str(REPO)
    }
    return subprocess.run(
        [sys.executable, "-m", "mscclpp_nccl", "table", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def test_the_command_both_ways(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps(TABLE))
    r = cli("export-csv", "--table", "t.json", "-o", "t.csv", cwd=tmp_path)
    assert r.returncode == 0 and "mscclpp_nccl: WARNING: " in r.stderr, r.stderr
    assert rows((tmp_path / "t.csv").read_text())[0] == "allreduce,0,65536,ring,ll,8,1,4,-1,-1"
    r = cli("import-csv", "t.csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    validate_table(json.loads(r.stdout))
    shipped = cli("export-csv", cwd=tmp_path)  # the table the library reads: the shipped one here
    assert shipped.returncode == 0 and rows(shipped.stdout), shipped.stderr
    for args, says in [
        (["import-csv", "none.csv"], "No such file"),
        (["export-csv", "--table", "none.json"], "No such file"),
    ]:
        r = cli(*args, cwd=tmp_path)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
