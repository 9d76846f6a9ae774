"""Every command README.md shows for our tools runs, as a user would type it, and does what the README says.

What is run: each line of a README code block that names one of our tools (`python -m mscclpp_nccl ...`,
`python -m mscclpp_nccl.run|bench|tune ...`, `mscclpp-nccl ...`, also inside `$(...)` or after `mpirun`),
continuation lines joined, through bash, in one scratch directory, in README order (so that
`table import-csv` reads what `table export-csv` wrote). A tool named alone in running text (`python -m
mscclpp_nccl tune`) runs with `--help`. Lines that name no tool of ours (pip, pytest, a plain `python
my_job.py`) are not run.

The rules, since this is a CPU test and runs where no GPU is:
- GPUs are hidden (CUDA_VISIBLE_DEVICES=""), on a GPU machine too, so every run is the same.
- Programs that are not ours are stand-ins on PATH: `torchrun` and `./all_reduce_perf` print the
  LD_PRELOAD they were given (which must be our library: what those lines promise); `mpirun -np N` starts
  N processes with Open MPI's variables (tests/fake_mpirun.py); `python` is this interpreter, and
  `my_job.py` prints its rank.
- A command that needs a GPU (the bench, the tuner, selfcheck) must parse its arguments and stop with
  the clean exit code the README documents for no GPU (2 for the bench and the tuner, 3 for selfcheck),
  saying so on its last line; under mpirun, every rank. Commands that need none (run, info, table, path)
  run for real and are checked for their result.
- Never a traceback, and nothing hangs.
Each command must match one of RULES below; a new kind of command in the README fails this test until it
gets a rule.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mscclpp_nccl.tune.table import load_table

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TOOL = re.compile(
    r"python -m mscclpp_nccl\b|(^|[\s(])mscclpp-nccl (path|info|table|selfcheck|run|bench|tune)\b"
)
MY_JOB = "import os\nprint(f\"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}\")\n"


@dataclass(frozen=True)
class Command:
    line: int  # where it starts in README.md
    text: str  # as bash runs it
    inline: bool = False  # named in running text (run with --help)

    def __str__(self) -> str:
        return f"README.md:{self.line}: {self.text}"

    @property
    def bare(self) -> str:
        """The command without its trailing comment."""
        return re.sub(r"\s+#.*$", "", self.text)


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of every line inside a code block: fenced, or indented four columns past the
    text it follows (so inside a list item too), after a blank line."""
    out: list[tuple[int, str]] = []
    fence = False
    block: int | None = None  # the indentation of the block being read
    base = 0  # where the text of the last prose line starts (after a list marker)
    blank = True
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if stripped.startswith("```"):
            fence, blank = not fence, False
            continue
        if fence:
            out.append((n, stripped))
            continue
        if not stripped:
            blank = True
            continue
        if block is not None and indent >= block:
            out.append((n, line[block:]))
        elif blank and indent >= base + 4:
            block = indent
            out.append((n, line[block:]))
        else:
            block = None
            marker = re.match(r"\s*(?:[-*+]|\d+\.)\s+", line)
            base = marker.end() if marker else indent
        blank = False
    return out


def readme_commands(text: str) -> list[Command]:
    """The tool commands of the README's code blocks, then those named in running text."""
    commands: list[Command] = []
    pending: tuple[int, str] | None = None
    for n, line in code_lines(text):
        start, joined = pending if pending else (n, "")
        joined += line.strip()
        if joined.endswith("\\"):
            pending = (start, joined[:-1].rstrip() + " ")
            continue
        pending = None
        if not joined.startswith("#") and TOOL.search(joined):
            commands.append(Command(start, joined))
    # Running text: the code blocks and their fences blanked out, line numbers kept.
    code = {n for n, _ in code_lines(text)}
    prose = "\n".join(
        "" if n in code or line.lstrip().startswith("```") else line
        for n, line in enumerate(text.splitlines(), 1)
    )
    for m in re.finditer(r"`([^`\n]*(?:\n[^`\n]*)?)`", prose):
        span = " ".join(m.group(1).split())
        if re.fullmatch(r"python -m mscclpp_nccl[\w. -]*|mscclpp-nccl [a-z]+", span) and TOOL.search(span):
            commands.append(Command(prose.count("\n", 0, m.start()) + 1, span, inline=True))
    return commands


# --- what each command must do ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    command: Command
    rc: int
    out: str
    err: str
    work: Path  # the scratch directory it ran in
    lib: Path  # our libnccl.so.2


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def check_preload(r: Ran) -> None:
    """`LD_PRELOAD=$(python -m mscclpp_nccl path) PROGRAM`: the program gets our library."""
    assert r.rc == 0, r.err
    assert f"LD_PRELOAD={r.lib}" in r.out.splitlines(), r.out


def check_no_gpu_under_mpirun(r: Ran) -> None:
    """`mpirun -np N python -m mscclpp_nccl.bench ...`: each rank parses its arguments, finds no GPU and
    exits 2 before waiting for the others."""
    nranks = int(re.search(r"-np (\d+)", r.command.text).group(1))  # type: ignore[union-attr]
    assert r.rc == 2, r.err
    said = [
        line for line in r.err.splitlines() if line.endswith("no NVIDIA GPU visible; nothing to benchmark")
    ]
    assert len(said) == nranks and "usage:" not in r.err, r.err


def check_no_gpu(what: str) -> Callable[[Ran], None]:
    def check(r: Ran) -> None:
        """The bench or the tuner: arguments parsed, then exit 2 saying there is no GPU."""
        assert r.rc == 2 and "usage:" not in r.err, r.err
        assert last_line(r.err).endswith(f"no NVIDIA GPU visible; nothing to {what}"), r.err

    return check


def check_selfcheck(r: Ran) -> None:
    """selfcheck without a GPU: what was built on stdout, exit 3 (nothing checked), as the README says."""
    assert r.rc == 3 and "library:" in r.out, r.out + r.err
    assert last_line(r.err).endswith("nothing checked: no NVIDIA GPU visible"), r.err


def check_ranks(r: Ran) -> None:
    """The launcher runs N ranks of my_job.py, each with torchrun's RANK and WORLD_SIZE."""
    n = int(re.search(r"-n (\d+)", r.command.text).group(1))  # type: ignore[union-attr]
    assert r.rc == 0, r.out + r.err
    assert sorted(line for line in r.out.splitlines() if " of " in line) == sorted(
        f"[{rank}] rank {rank} of {n}" for rank in range(n)
    ), r.out


def check_info(r: Ran) -> None:
    assert r.rc == 0 and "library:" in r.out, r.out + r.err
    if "--table" in r.command.text:
        assert "  all_reduce" in r.out.splitlines(), r.out


def check_export(r: Ran) -> None:
    out = re.search(r"-o (\S+)", r.command.text).group(1)  # type: ignore[union-attr]
    assert r.rc == 0, r.err
    assert "allreduce," in (r.work / out).read_text()


def check_import(r: Ran) -> None:
    out = re.search(r"-o (\S+)", r.command.text).group(1)  # type: ignore[union-attr]
    assert r.rc == 0, r.err
    assert load_table(str(r.work / out))["entries"]


def check_path(r: Ran) -> None:
    assert r.rc == 0 and r.out == f"{r.lib}\n", r.out + r.err


def check_help(r: Ran) -> None:
    """A tool named in running text: it exists under that name (`--help` prints its usage)."""
    assert r.rc == 0 and r.out.startswith("usage:"), r.out + r.err


# (pattern searched in the command, check), the first match applies.
RULES: list[tuple[str, Callable[[Ran], None]]] = [
    (r"^LD_PRELOAD=\$\(python -m mscclpp_nccl path\) ", check_preload),
    (r"^mpirun -np \d+ python -m mscclpp_nccl\.bench ", check_no_gpu_under_mpirun),
    (r"python -m mscclpp_nccl(\.| )bench ", check_no_gpu("benchmark")),
    (r"python -m mscclpp_nccl(\.| )tune ", check_no_gpu("tune")),
    (r"python -m mscclpp_nccl selfcheck$", check_selfcheck),
    (r"python -m mscclpp_nccl(\.| )run -n \d+ .*-- python my_job\.py", check_ranks),
    (r"^python -m mscclpp_nccl info\b", check_info),
    (r"^python -m mscclpp_nccl table export-csv -o \S+$", check_export),
    (r"^python -m mscclpp_nccl table import-csv \S+ -o \S+$", check_import),
    (r"^python -m mscclpp_nccl path$", check_path),
]


def rule_for(command: Command) -> Callable[[Ran], None] | None:
    if command.inline:
        return check_help
    return next((check for pattern, check in RULES if re.search(pattern, command.bare)), None)


# --- running them ----------------------------------------------------------------------------------------


def stand_ins(bin_dir: Path, work: Path) -> None:
    """python, torchrun, mpirun and mscclpp-nccl on PATH; ./all_reduce_perf, my_job.py, train.py here."""
    scripts = {
        bin_dir / "python": f'exec {sys.executable} "$@"',
        bin_dir / "mscclpp-nccl": f'exec {sys.executable} -m mscclpp_nccl "$@"',
        bin_dir / "mpirun": f'exec {sys.executable} {ROOT / "tests" / "fake_mpirun.py"} "$@"',
        bin_dir / "torchrun": 'echo "LD_PRELOAD=$LD_PRELOAD"',
        work / "all_reduce_perf": 'echo "LD_PRELOAD=$LD_PRELOAD"',
    }
    for path, body in scripts.items():
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    (work / "my_job.py").write_text(MY_JOB)
    (work / "train.py").write_text("")


def run(command: Command, work: Path, env: dict[str, str], lib: Path) -> Ran:
    text = f"{command.text} --help" if command.inline else command.text
    try:
        r = subprocess.run(
            ["bash", "-c", text],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Ran(command, -1, "", "hung: no exit within 180 s", work, lib)
    return Ran(command, r.returncode, r.stdout, r.stderr, work, lib)


COMMANDS = readme_commands(README.read_text())


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, nccl_lib: Path) -> dict[Command, Ran]:
    """Every command's outcome, run in README order in one scratch directory."""
    work = tmp_path_factory.mktemp("readme")
    bin_dir = work / ".bin"
    bin_dir.mkdir()
    stand_ins(bin_dir, work)
    foreign = ("MSCCLPP_NCCL_", "NCCL_", "OMPI_", "PMI", "MPI_", "MV2_", "MASTER_", "LD_PRELOAD")
    env = {k: v for k, v in os.environ.items() if not k.startswith(foreign)}
    env |= {
        "CUDA_VISIBLE_DEVICES": "",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "PYTHONPATH": str(ROOT),
        "MSCCLPP_NCCL_LIB": str(nccl_lib),
        "NODE_RANK": "0",
        "HEAD": "127.0.0.1",
    }
    return {c: run(c, work, env, nccl_lib) for c in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS, ids=[f"L{c.line}" for c in COMMANDS])
def test_readme_command(command: Command, ran: dict[Command, Ran]) -> None:
    check = rule_for(command)
    assert check is not None, f"{command}: no rule says how to run this; add one to RULES"
    r = ran[command]
    assert "Traceback" not in r.out + r.err, f"{command}\n{r.out}{r.err}"
    assert r.rc != -1, f"{command}: {r.err}"
    check(r)


def test_every_tool_command_is_found() -> None:
    """Each `python -m mscclpp_nccl` in the README is in a command above, or in a comment of a code block:
    none is missed by the extraction, nor shown where this test does not look."""
    text = README.read_text()
    comments = [line for _, line in code_lines(text) if line.lstrip().startswith("#")]
    found = [c.text for c in COMMANDS] + comments
    needle = "python -m mscclpp_nccl"
    assert sum(s.count(needle) for s in found) == text.count(needle)
    assert len([c for c in COMMANDS if not c.inline]) >= 10


def test_the_extraction() -> None:
    text = "\n".join(
        [
            "Some text:",
            "",
            "    python -m mscclpp_nccl info \\",
            "        --table",
            "    pip install .",
            "- an item",
            "  continued, then a block:",
            "",
            "      python -m mscclpp_nccl path  # a comment",
            "  - nested",
            "    python -m mscclpp_nccl prose, not code",
            "",
            "```",
            "mscclpp-nccl info",
            "```",
            "Run `python -m mscclpp_nccl",
            "tune` or see `mscclpp-nccl 1.0 (abc)`.",
        ]
    )
    assert [(c.line, c.text, c.inline) for c in readme_commands(text)] == [
        (3, "python -m mscclpp_nccl info --table", False),
        (9, "python -m mscclpp_nccl path  # a comment", False),
        (14, "mscclpp-nccl info", False),
        (16, "python -m mscclpp_nccl tune", True),
    ]
