"""What every command-line entry shares: how it exits."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

# What the tools say to `-N`: every one of them counts ranks with --nranks, and -N is nccl-tests'
# --run_cycles (the bench takes it with that meaning).
DASH_N_REFUSED = "-N is not a rank count (in nccl-tests it is --run_cycles): give --nranks"


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
