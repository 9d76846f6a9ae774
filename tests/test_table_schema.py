"""The tuning table's JSON Schema (mscclpp_nccl/tuning/table.schema.json), checked with jsonschema: the
shipped table follows it, it names exactly the library's algorithms and collectives, and it agrees with the
C parser on the parser's own test cases (tests/test_tuning_table.py): every document the parser refuses is
refused by the schema too, except the few constraints a schema cannot state, which its description lists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_tuning_table import EXAMPLE, VALIDATION_ERRORS

from mscclpp_nccl.bench.collectives import COLLECTIVES
from mscclpp_nccl.selection import REGISTRY
from mscclpp_nccl.tune.table import TableError, validate_table

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (pip install jsonschema)")

REPO = Path(__file__).resolve().parent.parent
SCHEMA_PATH = REPO / "mscclpp_nccl" / "tuning" / "table.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
# Parser cases that a JSON Schema cannot refuse: order between rules, a comparison of two fields, and
# floats with no fraction (JSON Schema's integers include 512.0). The schema's description names them.
BEYOND_THE_SCHEMA = {
    "unsorted rules",
    "equal max_bytes",
    "null not last",
    "two nulls",
    "ranks_per_gpu above nranks",
    "threads float",
    "version float",
}


def errors(doc: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [e.message for e in validator.iter_errors(doc)]


def test_the_schema_is_a_valid_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    for phrase in ("increasing max_bytes", "null only in the last rule", "not above nranks", "4, not 4.0"):
        assert phrase in SCHEMA["description"]


def test_the_shipped_table_follows_it() -> None:
    assert errors(json.loads((REPO / "mscclpp_nccl" / "tuning" / "default.json").read_text())) == []


def test_it_names_the_library_s_algorithms_and_collectives() -> None:
    assert SCHEMA["$defs"]["rule"]["properties"]["algorithm"]["enum"] == list(REGISTRY)
    assert SCHEMA["$defs"]["entry"]["properties"]["collective"]["enum"] == list(COLLECTIVES)
    registry = (REPO / "native" / "algorithms" / "registry.cc").read_text()
    assert re.findall(r'\{AlgorithmId::k\w+, "(\w+)"', registry) == list(REGISTRY)
    header = (REPO / "native" / "algorithms" / "tuning_table.h").read_text()
    assert "(JSON, at most 1 MiB, 4096 entries and 256 rules an entry)" in header
    entries = SCHEMA["properties"]["entries"]
    assert (entries["maxItems"], SCHEMA["$defs"]["entry"]["properties"]["rules"]["maxItems"]) == (4096, 256)


def test_the_parser_s_example_is_valid() -> None:
    assert errors(EXAMPLE) == []


@pytest.mark.parametrize(
    ("name", "doc"), [(c[0], c[1]) for c in VALIDATION_ERRORS], ids=[c[0] for c in VALIDATION_ERRORS]
)
def test_what_the_parser_refuses_the_schema_refuses(name: str, doc: dict[str, Any]) -> None:
    if name in BEYOND_THE_SCHEMA:
        assert errors(doc) == [], f"{name}: now refused by the schema; take it off BEYOND_THE_SCHEMA"
    else:
        assert errors(doc), f"{name}: the C parser refuses it, the schema does not"


def test_an_algorithm_must_serve_its_collective() -> None:
    doc = json.loads(json.dumps(EXAMPLE))
    doc["entries"][0]["collective"] = "all_gather"
    assert errors(doc)
    with pytest.raises(TableError, match="does not serve all_gather"):
        validate_table(doc)
