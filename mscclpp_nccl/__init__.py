"""mscclpp-nccl: a drop-in libnccl.so.2 on our own CUDA kernels, with Python tooling.

Importing this package needs neither a GPU, CuPy nor the built library; those are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._library import build_info, library_path
from .gpus import local_device

__version__ = "0.1.0"  # the one place the version is written (setup.py and the library read it here)
VERSION = __version__

# NCCL release whose ABI the library implements (ncclGetVersion reports NCCL_VERSION_CODE).
NCCL_VERSION = (2, 32, 3)
NCCL_VERSION_CODE = 23203

if TYPE_CHECKING:
    from .binding import Nccl, NcclError
    from .communicator import Communicator, world_from_env

_LAZY = {
    "Nccl": "binding",
    "NcclError": "binding",
    "Communicator": "communicator",
    "world_from_env": "communicator",
}


def __getattr__(name: str) -> Any:
    # Lazy so that `import mscclpp_nccl` works where cffi is missing (the launcher, the CLI's `path`).
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NCCL_VERSION",
    "NCCL_VERSION_CODE",
    "VERSION",
    "Communicator",
    "Nccl",
    "NcclError",
    "__version__",
    "build_info",
    "library_path",
    "local_device",
    "world_from_env",
]
