"""`python -m mscclpp_nccl {info,path,selfcheck}`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._library import library_path
from .info import describe


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m mscclpp_nccl", description="mscclpp-nccl tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("path", help="print the path of libnccl.so.2 (for LD_PRELOAD)")
    sub.add_parser("info", help="the library, its version and targets, and the GPUs seen")
    sub.add_parser("selfcheck", help="check and time all-reduce on this machine's GPUs", add_help=False)
    # selfcheck has its own options; hand everything after the word to it.
    if argv[:1] == ["selfcheck"]:
        from .selfcheck import main as selfcheck_main

        return selfcheck_main(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "path":
        print(library_path())
        return 0
    if args.command == "info":
        lines, ok = describe()
        print("\n".join(lines))
        return 0 if ok else 1
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
