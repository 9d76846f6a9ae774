"""Where the library is, and what was built into it (no import of cffi or the library here)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent
LIB_DIR = PACKAGE_DIR / "lib"
LIB_ENV = "MSCCLPP_NCCL_LIB"


def library_path() -> Path:
    """The libnccl.so.2 to load: $MSCCLPP_NCCL_LIB when set, else the one built into the package."""
    override = os.environ.get(LIB_ENV)
    if override:
        return Path(override)
    return LIB_DIR / "libnccl.so.2"


def build_info() -> dict[str, Any]:
    """build_info.json written by setup.py next to the library; {} when absent or unreadable."""
    path = library_path().parent / "build_info.json"
    if not path.is_file():
        path = LIB_DIR / "build_info.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
