"""`python -m mscclpp_nccl {info,path,table,selfcheck,run,bench,tune}` (also installed as `mscclpp-nccl`)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from . import NCCL_VERSION, VERSION
from ._cli import DASH_N_REFUSED, configure_logging, exit_with
from ._library import library_path
from .info import describe

PROG = "python -m mscclpp_nccl"
log = logging.getLogger("mscclpp_nccl")


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
    return f"mscclpp-nccl {VERSION}, NCCL ABI {'.'.join(map(str, NCCL_VERSION))}"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _table_lines(args: argparse.Namespace) -> list[str]:
    """info --table's lines for the layout the options (or this machine) give."""
    from .bench.cli import default_ranks
    from .bench.collectives import resolve_types
    from .gpus import gpu_archs, gpu_names, visible_gpus
    from .selection import Layout, table_lines

    types = resolve_types(args.datatype)
    if len(types) != 1:
        raise ValueError("-d/--datatype takes one type")
    ngpus = len(visible_gpus())
    nranks = args.nranks or default_ranks(ngpus)
    ranks_per_gpu = args.ranks_per_gpu or -(-nranks // max(ngpus, 1))
    if ranks_per_gpu > nranks:
        raise ValueError(f"--ranks-per-gpu {ranks_per_gpu} is more than the {nranks} ranks")
    names = gpu_names()
    gpu = args.gpu or (names[0] if names else None)
    archs = [] if args.gpu else gpu_archs()
    arch = args.arch or (archs[0] if archs else "")
    lines = []
    if gpu is None:
        gpu, arch = "NVIDIA H200", args.arch or "sm_90"
        lines.append(f"no GPU seen: showing a {gpu} (--gpu NAME and --arch sm_NN for another)")
    return lines + table_lines(Layout(gpu, nranks, ranks_per_gpu, arch), types[0].size)


def _table_command(args: argparse.Namespace) -> int:
    """`table export-csv` and `table import-csv`: notes on stderr, the result to --out or stdout."""
    import json

    from .selection import table_in_use
    from .tune.nccl_csv import export_csv, import_csv
    from .tune.table import load_table, table_text, write_atomic

    if args.action == "export-csv":
        path = args.table
        if path is None:
            found, note = table_in_use()
            if found is None:
                raise ValueError(note)
            path = str(found)
        text, notes = export_csv(load_table(path))
    else:
        with open(args.csv) as f:
            table, notes = import_csv(f.read())
        text = table_text(table)
        json.loads(text)  # what is written parses
    for note in notes:
        log.warning("%s", note)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        write_atomic(args.out, text)
    return 0


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
    info = sub.add_parser(
        "info",
        help="the library, its version and targets, and the GPUs seen",
        description="What was built and what this machine has; with --table, which algorithm each"
        " collective and size gets, and whether a table entry or the built-in rules chose it.",
    )
    info.add_argument("--table", action="store_true", help="show the algorithm per collective and size")
    info.add_argument(
        "--nranks",
        type=_positive,
        default=None,
        help="with --table: ranks of the communicator (default: the visible GPUs, or 4 on one GPU)",
    )
    info.add_argument("-N", dest="dash_n", default=None, help=argparse.SUPPRESS)
    info.add_argument(
        "--ranks-per-gpu",
        type=_positive,
        default=None,
        help="with --table: ranks sharing a GPU (default: the ranks spread over the visible GPUs)",
    )
    info.add_argument("--gpu", default=None, help="with --table: the GPU model (default: GPU 0's name)")
    info.add_argument(
        "--arch", default=None, help="with --table: the GPU's architecture, as sm_90 (default: GPU 0's)"
    )
    info.add_argument(
        "-d", "--datatype", default="float", help="with --table: the element type (default float)"
    )
    table = sub.add_parser(
        "table",
        help="convert the tuning table to or from NCCL's tuner-plugin CSV",
        description="The tuning table (JSON; its schema is tuning/table.schema.json in the package) to and"
        " from NCCL's tuner-plugin CSV, where the meanings map (see mscclpp_nccl.tune.nccl_csv).",
    )
    actions = table.add_subparsers(dest="action", required=True, metavar="ACTION")
    export = actions.add_parser("export-csv", help="write the table as NCCL tuner-plugin CSV")
    export.add_argument(
        "--table", default=None, help="the table (default: the one the library reads, as info says)"
    )
    export.add_argument("-o", "--out", default="-", help="the CSV file (default: stdout)")
    imp = actions.add_parser("import-csv", help="make a table from NCCL tuner-plugin CSV")
    imp.add_argument("csv", help="the CSV file (NCCL_TUNER_CONFIG_FILE's format)")
    imp.add_argument("-o", "--out", default="-", help="the table to write (default: stdout)")
    for name, (_, text) in PASSTHROUGH.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in PASSTHROUGH:
        return PASSTHROUGH[argv[0]][0](argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "path":
        path = library_path()
        if not path.is_file():
            log.error("path: %s: no such file (not built, or MSCCLPP_NCCL_LIB is wrong)", path)
            return 1
        print(path)
        return 0
    if args.command == "info":
        if args.dash_n is not None:
            parser.error(DASH_N_REFUSED)
        table_only = (args.nranks, args.ranks_per_gpu, args.gpu)
        if not args.table and any(v is not None for v in table_only):
            parser.error("--nranks, --ranks-per-gpu and --gpu go with --table")
        lines, ok = describe()
        print("\n".join(lines))
        if args.table:
            try:
                print("\n".join(_table_lines(args)))
            except ValueError as e:
                log.error("info: %s", e)
                return 2
        return 0 if ok else 1
    if args.command == "table":
        try:
            return _table_command(args)
        except (OSError, ValueError) as e:
            log.error("table %s: %s", args.action, e)
            return 2
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    exit_with(main)
