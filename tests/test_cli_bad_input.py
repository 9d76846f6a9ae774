"""Every command-line entry, given bad input, says why in one line and exits with a code that means it:
no traceback, no hang. CPU only: CUDA_VISIBLE_DEVICES="" hides any GPU, so the same happens everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]  # after `python -m`
    rc: int
    says: str  # a piece of the message on stderr
    env: tuple[tuple[str, str], ...] = ()


def case(line: str, rc: int, says: str, **env: str) -> Case:
    return Case(tuple(line.split()), rc, says, tuple(env.items()))


MISSING = "/nonexistent-dir/file"
CASES = [
    # python -m mscclpp_nccl
    case("mscclpp_nccl", 2, "required"),
    case("mscclpp_nccl frobnicate", 2, "invalid choice"),
    case("mscclpp_nccl info extra", 2, "unrecognized arguments"),
    case("mscclpp_nccl path", 1, "no such file", MSCCLPP_NCCL_LIB=MISSING),
    case("mscclpp_nccl info", 1, "", MSCCLPP_NCCL_LIB=MISSING),
    case("mscclpp_nccl info --nranks 4", 2, "go with --table"),
    case("mscclpp_nccl info --table --nranks 0", 2, "at least 1"),
    case("mscclpp_nccl info --table -N 4", 2, "-N is not a rank count"),
    case("mscclpp_nccl info --table -d nosuch", 2, "unknown data type"),
    case("mscclpp_nccl table", 2, "required"),
    case(f"mscclpp_nccl table import-csv {MISSING}", 2, "No such file"),
    case("mscclpp_nccl table import-csv /etc/hostname", 2, "fields"),
    case(f"mscclpp_nccl table export-csv --table {MISSING}", 2, "No such file"),
    case("mscclpp_nccl table export-csv", 2, "does not exist", MSCCLPP_NCCL_TUNING_FILE=MISSING),
    # selfcheck, through the CLI and as its own module
    case("mscclpp_nccl selfcheck", 3, "nothing checked: no NVIDIA GPU visible"),
    case("mscclpp_nccl selfcheck -n 0", 2, "at least 1"),
    case("mscclpp_nccl selfcheck -n x", 2, "invalid integer"),
    case("mscclpp_nccl selfcheck --min-bytes 0", 2, "at least 4"),
    case("mscclpp_nccl selfcheck --min-bytes 1M --max-bytes 1K", 2, "more than --max-bytes"),
    case("mscclpp_nccl selfcheck --min-bytes 1Q", 2, "the unit must be K, M or G"),
    case("mscclpp_nccl selfcheck --min-bytes 1M", 3, "nothing checked"),
    case("mscclpp_nccl selfcheck --dtypes ,", 2, "names no data type"),
    case("mscclpp_nccl selfcheck --dtypes int8", 2, "unsupported dtype"),
    case("mscclpp_nccl selfcheck --iters 0", 2, "at least 1"),
    case("mscclpp_nccl selfcheck --warmup -1", 2, "at least 0"),
    case("mscclpp_nccl selfcheck --timeout 0", 2, "positive number of seconds"),
    case("mscclpp_nccl selfcheck --timeout nan", 2, "positive number of seconds"),
    case("mscclpp_nccl.selfcheck --worker", 2, "no rank information"),
    # the launcher
    case("mscclpp_nccl.run", 2, "required"),
    case("mscclpp_nccl.run -n 2", 2, "no command given"),
    case("mscclpp_nccl.run -n 0 -- true", 2, "at least 1"),
    case("mscclpp_nccl.run -n x -- true", 2, "invalid int"),
    case("mscclpp_nccl.run -n 2 -- nonexistent_command_xyz", 127, "command not found"),
    case(f"mscclpp_nccl.run -n 2 -- {MISSING}", 127, "no such file"),
    case("mscclpp_nccl.run -n 2 -- /etc", 126, "not an executable file"),
    case("mscclpp_nccl.run -n 2 --timeout -1 -- true", 2, "positive number of seconds"),
    case("mscclpp_nccl.run -n 2 --grace nan -- true", 2, "positive number of seconds"),
    case("mscclpp_nccl.run -n 2 --gpus , -- true", 2, "names no GPU"),
    case("mscclpp_nccl.run -n 2 --fake-hosts 0 -- true", 2, "at least 1"),
    case("mscclpp_nccl.run -n 2 --fake-hosts a,b,c -- true", 2, "3 host names for 2 ranks"),
    case("mscclpp_nccl run -n 2 -- nonexistent_command_xyz", 127, "command not found"),
    # the benchmark
    case("mscclpp_nccl.bench", 2, "required: collective"),
    case("mscclpp_nccl.bench frobnicate", 2, "invalid choice"),
    case("mscclpp_nccl.bench all_reduce", 2, "no NVIDIA GPU visible"),
    case("mscclpp_nccl.bench all_reduce -b x", 2, "invalid size"),
    case("mscclpp_nccl.bench all_reduce -b 1M -e 1K", 2, "minbytes"),
    case("mscclpp_nccl.bench all_reduce -d nosuchtype", 2, "unknown data type"),
    case("mscclpp_nccl.bench all_reduce -o nosuchop", 2, "unknown reduction op"),
    case("mscclpp_nccl.bench all_reduce -r x", 2, "invalid integer"),
    case("mscclpp_nccl.bench all_reduce -n 0", 2, "at least 1"),
    case("mscclpp_nccl.bench all_reduce -T nan", 2, "-T/--timeout is seconds"),
    case("mscclpp_nccl.bench all_reduce -S 1", 2, "-S/--report_timestamps 1 is not supported"),
    case(f"mscclpp_nccl.bench all_reduce --lib {MISSING}", 2, "no such file"),
    case(f"mscclpp_nccl.bench all_reduce -J {MISSING}/out.json", 2, "no such directory"),
    case("mscclpp_nccl bench all_reduce -b x", 2, "invalid size"),
    # the tuner
    case("mscclpp_nccl.tune", 2, "no NVIDIA GPU visible"),
    case("mscclpp_nccl.tune --nranks 0", 2, "at least 1"),
    case("mscclpp_nccl.tune -N 4", 2, "-N is not a rank count"),
    case("mscclpp_nccl.tune --collectives nosuch", 2, "unknown collective"),
    case("mscclpp_nccl.tune --candidates nosuch", 2, "unknown algorithm"),
    case("mscclpp_nccl.tune -f 1", 2, "at least 2"),
    case("mscclpp_nccl.tune -T nan", 2, "must be positive"),
    case(f"mscclpp_nccl.tune --out {MISSING}/t.json", 2, "no such directory"),
    case(f"mscclpp_nccl.tune --from-raw {MISSING}", 2, "No such file"),
    case("mscclpp_nccl.tune --from-raw /etc/hostname", 2, "--from-raw"),
    case("mscclpp_nccl tune --nranks 0", 2, "at least 1"),
]


def run_case(c: Case, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSCCLPP_NCCL_", "OMPI_", "PMI"))}
    env |= {"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT), **dict(c.env)}
    return subprocess.run(
        [sys.executable, "-m", *c.argv],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.mark.parametrize("c", CASES, ids=[" ".join(c.argv) for c in CASES])
def test_bad_input_is_refused_plainly(c: Case, tmp_path: Path) -> None:
    r = run_case(c, tmp_path)
    output = r.stdout + r.stderr
    assert "Traceback" not in output, output
    assert r.returncode == c.rc, output
    assert c.says in r.stderr, output
    if c.rc != 0 and c.says:
        # The reason ends what is said (after the usage, if any), not buried in a dump.
        assert c.says in "\n".join(r.stderr.strip().splitlines()[-2:]), r.stderr


def test_from_raw_of_the_right_format_but_wrong_contents(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_text('{"format": "mscclpp-nccl-tune-raw", "ours": 5}')
    c = case(f"mscclpp_nccl.tune --from-raw {raw} --out {tmp_path / 't.json'}", 2, "malformed results")
    r = run_case(c, tmp_path)
    assert "Traceback" not in r.stderr and r.returncode == 2 and c.says in r.stderr, r.stderr


@pytest.mark.parametrize("argv", [["mscclpp_nccl", "info"], ["mscclpp_nccl.bench", "--help"]])
def test_a_reader_that_goes_away_is_no_error(argv: list[str], tmp_path: Path) -> None:
    """`python -m mscclpp_nccl info | head -1`: no traceback when stdout's reader has gone."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 141), err
    assert "Traceback" not in err, err
