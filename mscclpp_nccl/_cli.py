"""What every command-line entry shares: how it reports (logging) and how it exits."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

# What the tools say to `-N`: every one of them counts ranks with --nranks, and -N is nccl-tests'
# --run_cycles (the bench takes it with that meaning).
DASH_N_REFUSED = "-N is not a rank count (in nccl-tests it is --run_cycles): give --nranks"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler on whatever sys.stderr is when a record comes (a redirected or captured stream too)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging() -> None:
    """The tools' diagnostics go to stderr, one line each (`mscclpp_nccl.bench: ERROR: ...`), from INFO up;
    what a tool produces stays on stdout. Each entry point calls it; the second call does nothing."""
    top = logging.getLogger("mscclpp_nccl")
    if not any(isinstance(h, _Stderr) for h in top.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
        top.addHandler(handler)
        top.setLevel(logging.INFO)


def exit_with(main: Callable[[], int]) -> NoReturn:
    """sys.exit(main()), quietly when the reader of stdout went away (`... | head`): no traceback, and exit
    code 141 as a shell reports a command ended by SIGPIPE."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would complain again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 141
    sys.exit(code)
