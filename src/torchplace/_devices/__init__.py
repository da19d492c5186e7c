"""Discover the devices this process can use, choose one, and explain the choice.

``devices()`` lists the CPU and every CUDA (or ROCm), MPS and XPU device torch can use,
with memory, compute capability, bf16/TF32 support and, where NVML answers, the
``nvidia-smi`` facts. ``device(spec)`` turns ``"auto"``, ``"cuda:1"``, ``"gpu"``, ``1``
or a ``torch.device`` into a checked ``torch.device`` and says what to do when the
device is not there.

One concern per module, each importing only those listed before it:

- ``probe``: the seams, one small function per question asked of the machine (torch's
  files and runtime, the CUDA driver, NVML, ``/proc``). Tests patch these.
- ``build``: which torch is installed (``TorchBuild``), read from its files.
- ``nvml``: the NVIDIA driver's facts, and torch's ``cuda:N`` mapped to NVML's device.
- ``discovery``: ``DeviceInfo`` per backend, ``devices()``, and why there is no GPU.
- ``spec``: parsing and checking device specs, with errors that say what to do.
- ``choice``: ``device()``, and what ``"auto"`` picks and why.

Nothing here imports torch or touches CUDA at import time. On a build that cannot have
an accelerator, or a CUDA build on a machine whose CUDA driver library does not load,
discovery and ``"auto"`` do not import torch at all.

Examples:
    >>> from torchplace._devices import device, devices
    >>> devices()[0].type  # the CPU is always listed first
    'cpu'
    >>> device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

from torchplace._devices.build import TorchBuild, torch_build
from torchplace._devices.choice import auto_choice, device, explain_auto
from torchplace._devices.discovery import DeviceInfo, devices, no_gpu_reason
from torchplace._devices.nvml import GpuProcess, NvmlStatus, nvml_status

__all__ = [
    "DeviceInfo",
    "GpuProcess",
    "NvmlStatus",
    "TorchBuild",
    "auto_choice",
    "device",
    "devices",
    "explain_auto",
    "no_gpu_reason",
    "nvml_status",
    "torch_build",
]
