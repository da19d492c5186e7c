"""What the benchmark runs on: devices, their names, free memory, dtype support.

One small function per hardware query, so tests can patch each one. Nothing here runs
at import; asking about an accelerator may initialise it (the benchmark is about to use
it anyway).

Examples:
    >>> import torch
    >>> from torchplace.bench.machine import free_bytes
    >>> free_bytes(torch.device("cpu")) > 0
    True
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch

__all__ = [
    "accelerators",
    "describe",
    "device_name",
    "free_bytes",
    "lacks",
    "load_average",
    "total_ram_bytes",
]


def _meminfo(field: str) -> int | None:
    """A ``/proc/meminfo`` field in bytes (``None`` off Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _available_ram_bytes() -> int:
    """RAM that can be allocated without swapping: ``MemAvailable``, else free pages."""
    available = _meminfo("MemAvailable")
    if available is not None:
        return available
    return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))


def total_ram_bytes() -> int:
    """Physical RAM of this machine in bytes."""
    total = _meminfo("MemTotal")
    if total is not None:
        return total
    return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))


def load_average() -> float | None:
    """Runnable processes averaged over the last minute (``None`` where unknown)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def _accelerator_count() -> int:
    if not torch.accelerator.is_available():
        return 0
    return int(torch.accelerator.device_count())


def _accelerator_type() -> str:
    acc = torch.accelerator.current_accelerator()
    return "cpu" if acc is None else acc.type


def accelerators() -> list[torch.device]:
    """Every accelerator torch can use here (``[]`` on a CPU-only machine)."""
    n = _accelerator_count()
    return [torch.device(_accelerator_type(), i) for i in range(n)]


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _cuda_name(index: int) -> str:
    return str(torch.cuda.get_device_name(index))


def device_name(device: torch.device) -> str:
    """A person's name for ``device``: the CPU model, or the GPU's name."""
    if device.type == "cpu":
        return _cpu_name()
    if device.type == "cuda":
        return _cuda_name(device.index or 0)
    return str(device)


def _cuda_free_bytes(index: int) -> int:
    return int(torch.cuda.mem_get_info(index)[0])


def free_bytes(device: torch.device) -> int | None:
    """Bytes that tensors can still take on ``device`` (``None`` where unknown)."""
    if device.type == "cpu":
        return _available_ram_bytes()
    if device.type == "cuda":
        return _cuda_free_bytes(device.index or 0)
    return None


def _cuda_capability(index: int) -> tuple[int, int]:
    major, minor = torch.cuda.get_device_capability(index)
    return int(major), int(minor)


def _cuda_bf16(index: int) -> bool:
    with torch.cuda.device(index):
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))


def lacks(device: torch.device, precision: str) -> str | None:
    """Why ``device`` cannot run ``precision`` natively, or ``None`` when it can.

    Only answers what can be known without running: CUDA's bf16 and TF32 need compute
    capability 8.0. (CPU fp16 is probed by timing; see ``torchplace.bench.peaks``.)

    Examples:
        >>> import torch
        >>> lacks(torch.device("cpu"), "tf32")
        'TF32 is a feature of NVIDIA tensor cores (compute capability 8.0+)'
    """
    if precision == "tf32" and device.type != "cuda":
        return "TF32 is a feature of NVIDIA tensor cores (compute capability 8.0+)"
    if device.type != "cuda":
        return None
    index = device.index or 0
    if precision == "tf32" and _cuda_capability(index) < (8, 0):
        cc = ".".join(map(str, _cuda_capability(index)))
        return f"TF32 needs compute capability 8.0+, this GPU has {cc}"
    if precision == "bf16" and not _cuda_bf16(index):
        return "this GPU has no native bf16 (needs compute capability 8.0+)"
    return None


def describe(devices: list[torch.device]) -> dict[str, Any]:
    """The machine, for the report: CPU, threads, RAM, and the devices measured."""
    return {
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "ram_bytes": total_ram_bytes(),
        "load_average": load_average(),
        "torch": torch.__version__,
        "accelerators": [
            {"device": str(d), "name": device_name(d)} for d in devices if d.type != "cpu"
        ],
    }
