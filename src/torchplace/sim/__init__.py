"""Simulated GPUs on a machine that has none.

``simulate()`` runs a block of ordinary PyTorch code as if the machine had ``gpus`` GPUs of
the named model: ``torch.cuda`` answers as those GPUs would, tensors on ``cuda:N`` hold no
data and no host memory, CUDA's device rules are enforced with PyTorch's own errors, every
allocation goes through a model of the CUDA caching allocator (out of memory raises
``torch.OutOfMemoryError`` as on the GPU), and every operation is priced by the roofline
cost model. ``torchplace sim script.py`` does the same for a whole script, in a child
process.

With ``values="real"`` (the default) simulated tensors hold their data in host memory and
every operation computes it on the CPU, so ``.item()``, ``print(t)`` and control flow on
values are exact. With ``values="placeholder"`` they hold no data (any model size): values
read back are zeros. Either way each read is counted as a device-to-host synchronisation
with its file and line.

Examples:
    >>> import torch, torchplace
    >>> with torchplace.simulate("H100") as report:
    ...     x = torch.randn(1024, 1024, device="cuda")
    ...     y = (x @ x).sum()
    >>> x.device, report.device(0).peak_allocated_bytes >= 4 * 1024 * 1024
    (device(type='cuda', index=0), True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "SCHEMA_VERSION",
    "VALUES",
    "DeviceReport",
    "HostMemoryError",
    "SimReport",
    "print_report",
    "render",
    "simulate",
]

# name -> module; imported on first use, so the command line can read reports without torch
_EXPORTS = {
    "SCHEMA_VERSION": "torchplace.sim.report",
    "DeviceReport": "torchplace.sim.report",
    "SimReport": "torchplace.sim.report",
    "print_report": "torchplace.sim.report",
    "render": "torchplace.sim.report",
    "VALUES": "torchplace.sim.emulation._simulate",
    "HostMemoryError": "torchplace.sim.accounting._hostmem",
    "simulate": "torchplace.sim.emulation._simulate",
}

if TYPE_CHECKING:
    from torchplace.sim.accounting._hostmem import HostMemoryError
    from torchplace.sim.emulation._simulate import VALUES, simulate
    from torchplace.sim.report import (
        SCHEMA_VERSION,
        DeviceReport,
        SimReport,
        print_report,
        render,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'torchplace.sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
