"""Which torch is installed and what it was built for, read without importing it.

Examples:
    >>> from torchplace._devices.build import torch_build
    >>> torch_build().platform == __import__("sys").platform
    True
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any

from torchplace._devices import probe

__all__ = ["TorchBuild", "torch_build"]


@dataclass(frozen=True, kw_only=True)
class TorchBuild:
    """Which torch is installed and what it was built for.

    Attributes:
        version: ``torch.__version__``, e.g. ``"2.13.0+cpu"``.
        cuda: CUDA version torch was built with, or ``None``.
        hip: ROCm/HIP version torch was built with, or ``None``.
        xpu: Intel XPU (SYCL) version torch was built with, or ``None``.
        debug: Whether this is a debug build.
        git_version: The commit torch was built from.
        platform: ``sys.platform`` of this process (``"linux"``, ``"darwin"``, ...).

    Examples:
        >>> b = TorchBuild(version="2.13.0+cpu", cuda=None, hip=None, xpu=None,
        ...                debug=False, git_version=None, platform="linux")
        >>> b.kind, b.cpu_only
        ('CPU-only', True)
    """

    version: str
    cuda: str | None
    hip: str | None
    xpu: str | None
    debug: bool
    git_version: str | None
    platform: str

    @property
    def kind(self) -> str:
        """``"CUDA 12.8"``, ``"ROCm 6.4"``, ``"XPU ..."``, ``"CPU + MPS"`` or ``"CPU-only"``."""
        if self.cuda:
            return f"CUDA {self.cuda}"
        if self.hip:
            return f"ROCm {self.hip}"
        if self.xpu:
            return f"XPU {self.xpu}"
        return "CPU + MPS" if self.platform == "darwin" else "CPU-only"

    @property
    def cpu_only(self) -> bool:
        """True when this build cannot use any accelerator on this platform."""
        return self.kind == "CPU-only"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data: every field plus ``kind``."""
        return {**asdict(self), "kind": self.kind}


def torch_build() -> TorchBuild:
    """Which torch is installed, read without importing torch when possible.

    Returns:
        The build record (version, CUDA/ROCm/XPU versions, platform).

    Raises:
        RuntimeError: torch is not installed.

    Examples:
        >>> import torch
        >>> torch_build().version == torch.__version__
        True
    """
    f = probe.torch_version_fields()
    return TorchBuild(
        version=str(f.get("__version__")),
        cuda=f.get("cuda") or None,
        hip=f.get("hip") or None,
        xpu=f.get("xpu") or None,
        debug=bool(f.get("debug")),
        git_version=f.get("git_version"),
        platform=sys.platform,
    )
