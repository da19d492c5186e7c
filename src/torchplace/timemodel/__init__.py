"""The step-time model: how long each kernel of a step takes on a given GPU, and the step.

One module per kernel class (:mod:`~torchplace.timemodel.gemm` for matrix products and
convolutions' implicit GEMMs, :mod:`~torchplace.timemodel.memory` for memory-bound kernels,
:mod:`~torchplace.timemodel.attention` for fused attention, :mod:`~torchplace.timemodel.host`
for the CPU side of eager PyTorch, :mod:`~torchplace.timemodel.comm` for collectives),
the constants they need in :mod:`~torchplace.timemodel.params` (each with its source), and
:class:`DeviceModel`, which prices a kernel signature (:mod:`~torchplace.timemodel.kernels`)
once per GPU. docs/time-model.md describes every term; ``benchmarks/timing_accuracy.py``
checks the model against published measurements.

Examples:
    >>> from torchplace import catalog
    >>> from torchplace.timemodel import DeviceModel
    >>> a100 = DeviceModel.from_spec(catalog.lookup("A100"))
    >>> a100.seconds(("gemm", 4096, 4096, 4096, 1, "bf16", 3 * 4096 * 4096 * 2))[1]
    'compute'
"""

from __future__ import annotations

from torchplace.timemodel.device import DeviceModel, arch_of
from torchplace.timemodel.host import op_host_seconds
from torchplace.timemodel.params import Params, load

__all__ = ["DeviceModel", "Params", "arch_of", "load", "op_host_seconds"]
