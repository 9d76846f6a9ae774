""".ci/check_history.py: which text counts as the project's own history, and the commit-subject rule
(CPU only). The examples of history are assembled from pieces so that this file passes the check."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
SESSION = "ses" + "sion"  # kept apart so that this file itself cites no history
ISSUE = "iss" + "ue"
RESULTS = "res" + "ults"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_history", REPO / ".ci" / "check_history.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


check = load()

HISTORY = [
    f"// measured in {SESSION} 21",
    f"as found in {SESSION.capitalize()} 3",
    f"the {ISSUE} 12 deliverable",
    f"see {ISSUE} #7",
    f"{ISSUE.capitalize()} 13's figures",
    f"perf/{RESULTS}/2026-12-02-h200/README.md",
    "perf/experi" + "ments/receive_sweep",
    "2026-12-02-h200-" + "s13",
    "(h200-final-" + "s4/x_ar8)",
    "measured in " + "s19",
    "(" + "s20, 2026-12-03)",
    "the run" + "5/ logs",
    "bash run" + "3.sh",
    "(run" + " 4)",
    "runs" + " 1-2).",
    "run" + " C of the fake hosts",
    "as built in round" + " 5",
    "rounds of work" + " 3",
]
TECHNICAL = [
    "run 8 ranks on one GPU",
    "run N of them with the launcher",
    "--assign round-robin",
    "each round moves chunkWords words",
    "a memory round trip",
    "calls run in the order they were issued",
    "the issue order is a random topological order",
    "internal error - please report this issue to the NCCL developers",
    "uint32_t s0 = rotr(w[i - 15], 7);",
    "f(s1) + g(s2)",
    'asm("ld.global.s32 %0, [%1];")',
    "test_mesh_app runs 6 items in one launch",
    "a kernel that runs 2 us",
    "perf/nccl-tests-2026-12-04-cumem.csv",
    "start_new_session=True",
    "sort -s 1",
]


@pytest.mark.parametrize("line", HISTORY)
def test_history_is_found(line: str) -> None:
    """Every way the tree used to cite its history is caught."""
    assert check.line_findings("native/x.cc", line), line


@pytest.mark.parametrize("line", TECHNICAL)
def test_technical_text_passes(line: str) -> None:
    """Text about the code that merely looks like history is not flagged."""
    assert check.line_findings("native/x.cc", line) == [], line


def test_changelog_is_exempt_and_design_notes_hold_no_next_list() -> None:
    """CHANGELOG.md may keep history; a DESIGN*.md may not keep a "Next:" list, other files may."""
    assert check.line_findings("CHANGELOG.md", f"- fixed in {SESSION} 21") == []
    assert check.line_findings("native/transport/DESIGN-x.md", "Next: the two-shot")
    assert check.line_findings("native/x.cc", "// Next: the two-shot") == []


def test_files_under_results_folders_are_findings(tmp_path: Path) -> None:
    """A file kept in a results or experiments folder is history whatever it says; binary files are
    skipped, text files are read line by line with their line numbers."""
    (tmp_path / "a.md").write_text(f"fine\nsee {ISSUE} 4\n")
    (tmp_path / "b.bin").write_bytes(b"\0" + f"{SESSION} 1".encode())
    folder = tmp_path / "perf" / RESULTS
    folder.mkdir(parents=True)
    (folder / "x.txt").write_text("numbers\n")
    found = check.check_tree(tmp_path, ["a.md", "b.bin", f"perf/{RESULTS}/x.txt"])
    assert [f.where for f in found] == ["a.md:2", f"perf/{RESULTS}/x.txt"]


def test_subject_rule() -> None:
    """Subjects of at most 72 characters pass; longer or empty ones are findings."""
    ok = ("a" * 40, "x" * 72)
    long = ("b" * 40, "y" * 73)
    empty = ("c" * 40, " ")
    found = check.subject_findings([ok, long, empty])
    assert [f.where for f in found] == ["b" * 12, "c" * 12]
    assert "73 characters" in found[0].rule


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={**env, "PATH": "/usr/bin:/bin"},
    ).stdout.strip()


def test_main_checks_commits_after_the_base_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Commits up to the base are left alone; a later long subject or a later history citation in a
    tracked file fails the check; a base the clone lacks skips the subjects with a note."""
    git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("text\n")
    git(tmp_path, "add", "a.txt")
    git(tmp_path, "commit", "-q", "-m", "z" * 100)
    base = git(tmp_path, "rev-parse", "HEAD")
    assert check.main(["--root", str(tmp_path), "--base", base]) == 0
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "Short subject")
    assert check.main(["--root", str(tmp_path), "--base", base]) == 0
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "w" * 80)
    assert check.main(["--root", str(tmp_path), "--base", base]) == 1
    assert "80 characters" in capsys.readouterr().out
    assert check.main(["--root", str(tmp_path), "--base", "0" * 40]) == 0
    assert "not in this clone" in capsys.readouterr().out
    (tmp_path / "b.py").write_text(
        f"# from {SESSION} 9\n"
    )  # untracked but not ignored: it would be committed
    assert check.main(["--root", str(tmp_path), "--no-subjects"]) == 1
    assert "b.py:1" in capsys.readouterr().out
