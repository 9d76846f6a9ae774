#!/usr/bin/env python3
"""Keeps the project's own history out of the product, and commit subjects short.

1. No file of the tree outside CHANGELOG.md names a numbered session or round of work, an issue
   number, a numbered run, a run script, or a folder of run results or experiments under perf/, and
   no file lies in such a folder: history lives in git and in CHANGELOG.md, and code, tests and docs
   state their reasoning about the code and the hardware. Design notes (`DESIGN*.md`) hold no "Next:"
   lists.
2. Every commit after BASELINE has a subject of at most 72 characters that is not empty (older
   subjects cannot be rewritten).

Usage: python .ci/check_history.py [--root DIR] [--no-subjects] [--base REV]
Prints one line per finding and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# The last commit before the subject rule; older subjects are left as they are.
BASELINE = "6c1f95a05c3a9d326afdf8e15883123c5b08d631"
MAX_SUBJECT = 72
EXEMPT = {"CHANGELOG.md"}  # dated history, in user terms, belongs there

# Each rule names one way to cite history. They are written so that technical text passes:
# "run 8 ranks", "run N of them", "round-robin", "each round", "issued", "the issue order", `f(s1)`
# and PTX types such as `.s32` do not match.
RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "numbered session or round of work",
        re.compile(r"\b(?:sessions?|rounds? of work|sprints?)\s+#?\d+", re.I),
    ),
    ("numbered round", re.compile(r"\bround\s+\d+\b(?!\s*(?:B|KB|MB|bytes?|words?|us|ms)\b)", re.I)),
    ("issue number", re.compile(r"\bissues?\s*#\s*\d+|\bissues?\s+\d+\b", re.I)),
    (
        "results folder",
        re.compile(r"\bperf/(?:results|experiments)\b|(?<![\w.])(?:results|experiments)/20\d\d-"),
    ),
    ("dated results folder name", re.compile(r"\b20\d\d-\d\d-\d\d-[a-z]\w*\d*(?:-\w+)*-s\d{1,2}\b")),
    (
        "session tag",
        re.compile(
            r"(?<=[a-z0-9]-)[sS]\d{1,2}(?=[/)`,:\s]|-[a-z]|$)|\([sS]\d\d[,)]"
            r"|\b(?:in|since|from|after|before|see)\s+[sS]\d\d\b"
        ),
    ),
    ("run folder or script", re.compile(r"\brun-?(?:\d+|[A-Z])(?:/|\.sh\b|_logs\b|_summary\b)")),
    ("numbered run", re.compile(r"\bruns?\s+(?:\d+(?:\s*-\s*\d+)?|[A-H])\s*[),;]|\bruns?\s+[A-H]\s+of\b")),
]
DESIGN_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("a 'next' list in a design note", re.compile(r"\b(?:Next(?: steps)?|TODO)\s*:")),
    ("'as built in' history in a design note", re.compile(r"\bas built in\b", re.I)),
]


@dataclass(frozen=True)
class Finding:
    where: str  # path:line, or the commit
    rule: str
    text: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}: {self.text}"


def line_findings(path: str, text: str) -> list[Finding]:
    """What `text`, the contents of the file at `path` (relative to the root), cites of history."""
    if path in EXEMPT:
        return []
    rules = RULES + (DESIGN_RULES if Path(path).name.startswith("DESIGN") else [])
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for rule, pattern in rules:
            match = pattern.search(line)
            if match:
                start = max(0, match.start() - 30)
                found.append(Finding(f"{path}:{number}", rule, line[start : match.end() + 30].strip()))
                break  # one finding a line
    return found


def path_findings(path: str) -> list[Finding]:
    """A file kept under a results or experiments folder is itself history."""
    if re.match(r"perf/(?:results|experiments)/", path):
        return [Finding(path, "results folder", "files of run folders and experiments leave the tree")]
    return []


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def tree_files(root: Path) -> list[str]:
    """The files git tracks, and those it would add (untracked, not ignored)."""
    out = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted({p for p in out.split("\0") if p and (root / p).is_file()})


def read_text(path: Path) -> str | None:
    """The file's text, or None for a binary file (a NUL byte in its first 8 KiB)."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def check_tree(root: Path, files: Iterable[str]) -> list[Finding]:
    found = []
    for path in files:
        found += path_findings(path)
        text = read_text(root / path)
        if text is not None:
            found += line_findings(path, text)
    return found


def subject_findings(subjects: Iterable[tuple[str, str]]) -> list[Finding]:
    """(commit, subject) pairs whose subject breaks the rule."""
    found = []
    for commit, subject in subjects:
        if not subject.strip():
            found.append(Finding(commit[:12], "empty commit subject", ""))
        elif len(subject) > MAX_SUBJECT:
            found.append(
                Finding(commit[:12], f"subject of {len(subject)} characters (> {MAX_SUBJECT})", subject)
            )
    return found


def new_subjects(root: Path, base: str) -> list[tuple[str, str]] | None:
    """(commit, subject) of every commit after `base`; None where `base` is not in this clone."""
    try:
        git(root, "cat-file", "-e", f"{base}^{{commit}}")
    except subprocess.CalledProcessError:
        return None
    out = git(root, "log", "--format=%H%x00%s", f"{base}..HEAD")
    return [(line.split("\0", 1)[0], line.split("\0", 1)[1]) for line in out.splitlines() if "\0" in line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--base", default=BASELINE, help="check the subjects of commits after this one")
    parser.add_argument("--no-subjects", action="store_true", help="check the tree only")
    args = parser.parse_args(argv)
    found = check_tree(args.root, tree_files(args.root))
    if not args.no_subjects:
        subjects = new_subjects(args.root, args.base)
        if subjects is None:
            print(f"check_history: commit {args.base[:12]} is not in this clone; subjects not checked")
        else:
            found += subject_findings(subjects)
    for finding in found:
        print(finding)
    if found:
        print(
            f"check_history: {len(found)} finding(s). History goes to CHANGELOG.md and commit bodies; "
            "subjects say what changed in at most 72 characters (CONTRIBUTING.md)."
        )
        return 1
    print("check_history: no history in the tree; commit subjects within the rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
