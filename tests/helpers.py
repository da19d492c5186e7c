"""Shared test helpers (imported as ``helpers``: pytest puts this folder on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_torchplace(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m torchplace ARGS`` in a subprocess, its output captured as text.

    The child gets this environment without the variables that change torchplace's
    choices or layout (``TORCHPLACE_DEVICE``, ``COLUMNS``), plus ``env``.
    """
    environ = {k: v for k, v in os.environ.items() if k not in ("TORCHPLACE_DEVICE", "COLUMNS")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "torchplace", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
        cwd=cwd,
    )


def real_gpu() -> bool:
    """Whether this machine has a real CUDA GPU (not one simulated by ``pytest --sim-gpu``)."""
    import torch

    from torchplace.pytest_plugin import simulating

    return torch.cuda.is_available() and not simulating()


def save_format1(path: Path, **state: object) -> None:
    """Write a checkpoint as torchplace wrote them before they were sealed (format 1):
    ``torch.save`` of the same payload, version 1, to an open file, nothing appended."""
    import torch

    from torchplace.runner import checkpoint

    objects = {k: v for k, v in state.items() if checkpoint._is_stateful(v)}
    payload = {
        "format": "torchplace.checkpoint",
        "version": 1,
        "objects": {k: checkpoint._state_dict(k, v) for k, v in objects.items()},
        "values": {k: v for k, v in state.items() if k not in objects},
        "rng": [checkpoint._rng_state()],
    }
    with open(path, "wb") as f:
        torch.save(payload, f)
