"""`python -m mscclpp_nccl.bench`: runs the benchmark's command (see mscclpp_nccl.bench)."""

from .._cli import exit_with
from .cli import main

exit_with(main)
