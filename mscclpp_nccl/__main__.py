"""`python -m mscclpp_nccl {info,path,selfcheck,run,bench,tune}` (also installed as `mscclpp-nccl`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from . import NCCL_VERSION, __version__
from ._library import library_path
from .info import describe

PROG = "python -m mscclpp_nccl"


def _run_main(argv: list[str]) -> int:
    from .run import main

    return main(argv)


def _bench_main(argv: list[str]) -> int:
    from .bench import main

    return main(argv)


def _tune_main(argv: list[str]) -> int:
    from .tune import main

    return main(argv)


def _selfcheck_main(argv: list[str]) -> int:
    from .selfcheck import main

    return main(argv)


# Commands with options of their own: everything after the word goes to them.
PASSTHROUGH: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "selfcheck": (_selfcheck_main, "check and time all-reduce on this machine's GPUs"),
    "run": (_run_main, "run N ranks of a command (as python -m mscclpp_nccl.run)"),
    "bench": (_bench_main, "nccl-tests-compatible benchmark (as python -m mscclpp_nccl.bench)"),
    "tune": (_tune_main, "tune the algorithm table (as python -m mscclpp_nccl.tune)"),
}


def version_line() -> str:
    """`mscclpp-nccl X.Y.Z, NCCL ABI A.B.C` (the package's version and the NCCL release it implements)."""
    return f"mscclpp-nccl {__version__}, NCCL ABI {'.'.join(map(str, NCCL_VERSION))}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="mscclpp-nccl tools")
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "path",
        help="print the path of libnccl.so.2 (for LD_PRELOAD); exit 1 when it is missing",
        description="Print the path of libnccl.so.2 for LD_PRELOAD. Exits 1, printing nothing on stdout,"
        " when the file is missing (so that LD_PRELOAD=$(...) never names a file the loader ignores).",
    )
    sub.add_parser("info", help="the library, its version and targets, and the GPUs seen")
    for name, (_, text) in PASSTHROUGH.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in PASSTHROUGH:
        return PASSTHROUGH[argv[0]][0](argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "path":
        path = library_path()
        if not path.is_file():
            print(
                f"{PROG} path: error: {path}: no such file (not built, or MSCCLPP_NCCL_LIB is wrong)",
                file=sys.stderr,
            )
            return 1
        print(path)
        return 0
    if args.command == "info":
        lines, ok = describe()
        print("\n".join(lines))
        return 0 if ok else 1
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    from ._cli import exit_with

    exit_with(main)
