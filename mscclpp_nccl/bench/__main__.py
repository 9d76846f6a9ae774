"""`python -m mscclpp_nccl.bench`: runs the benchmark's command (see mscclpp_nccl.bench)."""

import sys

from .cli import main

sys.exit(main())
