"""The tuning table's format, as the C library's selector reads it: entries and their keys, validation,
merging, reading and writing."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from ..bench.collectives import COLLECTIVES
from .candidates import ALGORITHMS

TABLE_FORMAT = "mscclpp-nccl-tuning"
TABLE_VERSION = 1


class TableError(ValueError):
    """A tuning table that does not follow the format."""


WILDCARD = "*"  # in an entry's gpu, nranks, ranks_per_gpu or dtype_bytes: any (the C library's reading)


def entry_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two entries the same (a missing dtype_bytes means any, like "*")."""
    dtype_bytes = entry.get("dtype_bytes", WILDCARD)
    return (entry["gpu"], entry["nranks"], entry["ranks_per_gpu"], entry["collective"], dtype_bytes)


def make_entry(
    gpu: str,
    nranks: int,
    ranks_per_gpu: int,
    collective: str,
    dtype_bytes: int,
    rules: list[dict[str, Any]],
    arch: str | None = None,
) -> dict[str, Any]:
    """An entry; `arch` ("sm_90"), where known, lets it stand in for other GPUs of the architecture."""
    return {
        "gpu": gpu,
        **({"arch": arch} if arch else {}),
        "nranks": nranks,
        "ranks_per_gpu": ranks_per_gpu,
        "collective": collective,
        "dtype_bytes": dtype_bytes,
        "rules": rules,
    }


def new_table(entries: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return {"format": TABLE_FORMAT, "version": TABLE_VERSION, "entries": list(entries)}


def merge_tables(existing: dict[str, Any] | None, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`existing` (or an empty table) with `entries` merged in: an entry with the key of an existing one
    replaces it in place, others are appended; existing entries with other keys are kept."""
    out = list(existing["entries"]) if existing else []
    index = {entry_key(e): i for i, e in enumerate(out)}
    for e in entries:
        key = entry_key(e)
        if key in index:
            out[index[key]] = e
        else:
            index[key] = len(out)
            out.append(e)
    return new_table(out)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _exact_keys(obj: Any, where: str, required: set[str], optional: frozenset[str] = frozenset()) -> None:
    if not isinstance(obj, dict):
        raise TableError(f"{where}: expected an object")
    keys = set(obj)
    missing = required - keys
    unknown = keys - required - optional
    if missing:
        raise TableError(f"{where}: missing {', '.join(sorted(missing))}")
    if unknown:
        raise TableError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")


def validate_table(doc: Any) -> None:
    """Raises TableError unless doc is a tuning table exactly as the C library accepts it."""
    _exact_keys(doc, "table", {"format", "version", "entries"})
    if doc["format"] != TABLE_FORMAT:
        raise TableError(f"table: format is {doc['format']!r}, expected {TABLE_FORMAT!r}")
    if not _is_int(doc["version"]) or doc["version"] != TABLE_VERSION:
        raise TableError(f"table: version is {doc['version']!r}, expected {TABLE_VERSION}")
    if not isinstance(doc["entries"], list):
        raise TableError("table: entries must be an array")
    seen: set[tuple[Any, ...]] = set()
    for i, e in enumerate(doc["entries"]):
        where = f"entries[{i}]"
        _exact_keys(
            e,
            where,
            {"gpu", "nranks", "ranks_per_gpu", "collective", "rules"},
            frozenset({"arch", "dtype_bytes"}),
        )
        if not isinstance(e["gpu"], str) or not e["gpu"]:
            raise TableError(f"{where}.gpu: a device name or {WILDCARD!r}")
        if "arch" in e:
            if not isinstance(e["arch"], str) or not re.fullmatch(r"sm_[0-9]{1,3}", e["arch"]):
                raise TableError(f"{where}.arch: 'sm_' and the compute capability's digits, as 'sm_90'")
            if e["gpu"] == WILDCARD:
                raise TableError(f"{where}.arch: names the architecture of no GPU (gpu is {WILDCARD!r})")
        for key in ("nranks", "ranks_per_gpu"):
            if e[key] != WILDCARD and (not _is_int(e[key]) or e[key] < 1):
                raise TableError(f"{where}.{key}: a positive integer or {WILDCARD!r}")
        if _is_int(e["nranks"]) and _is_int(e["ranks_per_gpu"]) and e["ranks_per_gpu"] > e["nranks"]:
            raise TableError(f"{where}: ranks_per_gpu exceeds nranks")
        if e["collective"] not in COLLECTIVES:
            raise TableError(
                f"{where}.collective: {e['collective']!r} is not one of {', '.join(COLLECTIVES)}"
            )
        dtype_bytes = e.get("dtype_bytes", WILDCARD)
        if dtype_bytes != WILDCARD and (not _is_int(dtype_bytes) or dtype_bytes not in (1, 2, 4, 8)):
            raise TableError(f"{where}.dtype_bytes: 1, 2, 4, 8 or {WILDCARD!r}")
        key = entry_key(e)
        if key in seen:
            raise TableError(f"{where}: a second entry for {key}")
        seen.add(key)
        rules = e["rules"]
        if not isinstance(rules, list) or not rules:
            raise TableError(f"{where}.rules: a non-empty array")
        previous = 0
        for j, r in enumerate(rules):
            rw = f"{where}.rules[{j}]"
            _exact_keys(r, rw, {"max_bytes", "algorithm"}, frozenset({"blocks", "threads", "chunk_bytes"}))
            last = j == len(rules) - 1
            mb = r["max_bytes"]
            if last:
                if mb is not None:
                    raise TableError(f"{rw}.max_bytes: the last rule's is null")
            else:
                if not _is_int(mb) or mb < 1:
                    raise TableError(f"{rw}.max_bytes: a positive integer (null only in the last rule)")
                if mb <= previous:
                    raise TableError(f"{rw}.max_bytes: {mb} does not increase on {previous}")
                previous = mb
            algorithm = r["algorithm"]
            if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
                raise TableError(f"{rw}.algorithm: {algorithm!r} is not one of {', '.join(ALGORITHMS)}")
            if e["collective"] not in ALGORITHMS[algorithm]:
                raise TableError(f"{rw}.algorithm: {algorithm} does not serve {e['collective']}")
            for key in ("blocks", "threads", "chunk_bytes"):
                if key in r and (not _is_int(r[key]) or r[key] < 1):
                    raise TableError(f"{rw}.{key}: a positive integer")


def load_table(path: str) -> dict[str, Any]:
    """A table from a file, validated (TableError or OSError otherwise)."""
    with open(path) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise TableError(f"{path}: not JSON: {e}") from None
    try:
        validate_table(doc)
    except TableError as e:
        raise TableError(f"{path}: {e}") from None
    return doc


def table_text(doc: dict[str, Any]) -> str:
    validate_table(doc)
    return json.dumps(doc, indent=2) + "\n"


def write_table(path: str, doc: dict[str, Any]) -> None:
    write_atomic(path, table_text(doc))


def write_atomic(path: str, text: str) -> None:
    """Writes text to path through a temporary file, so that a reader never sees half of it."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
