"""`python -m mscclpp_nccl.tune`: runs the tuner's command (see mscclpp_nccl.tune)."""

from .._cli import exit_with
from .driver import main

exit_with(main)
