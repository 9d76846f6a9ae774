"""`python -m mscclpp_nccl.tune`: runs the tuner's command (see mscclpp_nccl.tune)."""

import sys

from .driver import main

sys.exit(main())
