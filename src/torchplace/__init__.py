"""torchplace: the PyTorch device toolkit.

Find the devices a machine has, put tensors, models and batches on them correctly,
see what that costs in memory and time, and simulate GPUs on a machine without one.

Importing torchplace does nothing but bind names: torch itself is imported the first
time one of the names below is used, and CUDA is never initialised at import.

Examples:
    >>> import torchplace
    >>> torchplace.device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it (imported lazily, see __getattr__)
_EXPORTS: dict[str, str] = {
    "DeviceInfo": "torchplace._devices",
    "devices": "torchplace._devices",
    "device": "torchplace._devices",
    "explain_auto": "torchplace._devices",
    "to": "torchplace.move",
    "where": "torchplace.move",
    "Placement": "torchplace.move",
    "check_same_device": "torchplace.move",
    "guard_same_device": "torchplace.move",
    "DeviceMismatchError": "torchplace.move",
    "memory": "torchplace",
    "catalog": "torchplace",
    "lint": "torchplace",
    "simulate": "torchplace.sim",
    "SimReport": "torchplace.sim",
    "find_max": "torchplace.sim.search",
    "Runner": "torchplace.runner",
    "save": "torchplace.runner",
    "load": "torchplace.runner",
}

__all__ = [
    "DeviceInfo",
    "DeviceMismatchError",
    "Placement",
    "Runner",
    "SimReport",
    "__version__",
    "catalog",
    "check_same_device",
    "device",
    "devices",
    "explain_auto",
    "find_max",
    "guard_same_device",
    "lint",
    "load",
    "memory",
    "save",
    "simulate",
    "to",
    "where",
]

if TYPE_CHECKING:
    from torchplace import catalog, lint, memory
    from torchplace._devices import DeviceInfo, device, devices, explain_auto
    from torchplace.move import (
        DeviceMismatchError,
        Placement,
        check_same_device,
        guard_same_device,
        to,
        where,
    )
    from torchplace.runner import Runner, load, save
    from torchplace.sim import SimReport, simulate
    from torchplace.sim.search import find_max


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'torchplace' has no attribute {name!r}")
    if module == "torchplace":  # a submodule exposed as an attribute
        value = importlib.import_module(f"torchplace.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
