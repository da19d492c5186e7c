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
