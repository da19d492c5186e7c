"""The training runner: your loop, on the right device, from one CPU to many GPUs.

- :class:`Runner`: the device (one per process under ``torchplace run``/torchrun), the
  precision, DDP, sharded batches on the device, metrics reduced over processes.
- :func:`save` / :func:`load`: atomic, ``weights_only`` checkpoints that load anywhere.
- :func:`resolve_precision`: which precisions a device can do.

Examples:
    >>> from torchplace.runner import Runner
    >>> Runner("cpu")
    Runner(device='cpu', precision='32', rank=0, world_size=1)
"""

from __future__ import annotations

from torchplace.runner._distributed import unwrap
from torchplace.runner._loader import DeviceLoader
from torchplace.runner._runner import Runner
from torchplace.runner.checkpoint import load, save
from torchplace.runner.precision import PRECISIONS, Precision, resolve_precision

__all__ = [
    "PRECISIONS",
    "DeviceLoader",
    "Precision",
    "Runner",
    "load",
    "resolve_precision",
    "save",
    "unwrap",
]
