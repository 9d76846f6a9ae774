"""mscclpp_nccl.gpus against a stand-in nvidia-smi: the names and architectures the tuning table keys on
(CPU only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mscclpp_nccl.gpus import gpu_archs, gpu_names

LIST = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0c5e2f6a-1111-2222-3333-444455556666)
GPU 1: NVIDIA H200 (UUID: GPU-7d8e9f00-1111-2222-3333-444455556666)
"""


def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caps: str, rc: int = 0) -> None:
    """An nvidia-smi on PATH that lists LIST for -L and prints `caps` for the compute-capability query."""
    (tmp_path / "list.txt").write_text(LIST)
    (tmp_path / "caps.txt").write_text(caps)
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -L ]; then /bin/cat {tmp_path}/list.txt; exit 0; fi\n'
        f'[ "$1" = --query-gpu=compute_cap ] || exit 9\n/bin/cat {tmp_path}/caps.txt\nexit {rc}\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_names_and_architectures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, "9.0\n9.0\n")
    assert gpu_names() == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert gpu_archs() == ["sm_90", "sm_90"]


@pytest.mark.parametrize(("caps", "rc"), [("[N/A]\n", 0), ("9.0\n", 4), ("", 0)])
def test_an_architecture_it_cannot_read_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caps: str, rc: int
) -> None:
    fake_smi(tmp_path, monkeypatch, caps, rc)
    assert gpu_archs() == []


def test_no_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_names() == [] and gpu_archs() == []
