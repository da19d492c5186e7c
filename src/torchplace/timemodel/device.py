"""One GPU as the step-time model sees it: catalog figures plus the model's constants.

:class:`DeviceModel` prices a *kernel signature* (a tuple naming the kernel class and the
shape that decides its time, made by :mod:`torchplace.timemodel.kernels`) once, and keeps
the answer: a training loop repeats the same few hundred signatures, so pricing costs a
dict lookup per operation after the first step.

Examples:
    >>> from torchplace import catalog
    >>> from torchplace.timemodel.device import DeviceModel
    >>> h100 = DeviceModel.from_spec(catalog.lookup("H100"))
    >>> h100.arch, h100.sms
    ('hopper', 132)
    >>> seconds, bound = h100.seconds(("mem", 1 << 30, 1))  # a GiB streamed
    >>> bound, seconds == (1 << 30) / h100.achievable_bandwidth + h100.kernel_overhead
    ('memory', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchplace.timemodel import attention, gemm, memory
from torchplace.timemodel.params import Params, load

if TYPE_CHECKING:
    from torchplace.catalog import GPUSpec

__all__ = ["DeviceModel", "arch_of"]

_TENSOR_CORE = ("tf32", "bf16", "fp16", "fp8")


def arch_of(spec: GPUSpec) -> str:
    """The architecture family of a catalog GPU: ``"volta"``, ``"turing"``, ``"ampere"``,
    ``"ada"``, ``"hopper"``, ``"blackwell"``, ``"cdna2"``, ``"cdna3"`` or ``"other"``."""
    if spec.compute_capability is not None:
        major, minor = spec.compute_capability
        return {
            (7, 0): "volta", (7, 5): "turing", (8, 0): "ampere", (8, 6): "ampere",
            (8, 7): "ampere", (8, 9): "ada", (9, 0): "hopper",
        }.get((major, minor), "blackwell" if major >= 10 else "other")  # fmt: skip
    arch = (spec.gcn_arch or "").split(":")[0]
    return {"gfx90a": "cdna2", "gfx940": "cdna3", "gfx941": "cdna3", "gfx942": "cdna3"}.get(
        arch, "other"
    )


@dataclass(frozen=True)
class DeviceModel:
    """A GPU for the step-time model.

    Attributes:
        name: the GPU, for people.
        sms: streaming multiprocessors (compute units on AMD).
        flops: dense peak FLOP/s per precision key (the catalog's ``peak_flops``).
        bandwidth: datasheet memory bandwidth, bytes/s.
        arch: the architecture family (:func:`arch_of`).
        hbm: whether its memory is HBM (a bus of 1024 bits or more) rather than GDDR.
        params: the model's constants (:func:`torchplace.timemodel.params.load`).
    """

    name: str
    sms: int
    flops: Mapping[str, float]
    bandwidth: float
    arch: str
    hbm: bool = True
    params: Params = field(default_factory=load)
    _cache: dict[Any, tuple[float, str]] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )
    #: the host's CPU seconds per operation (:func:`torchplace.timemodel.host.op_host_seconds`)
    host_seconds: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        from torchplace.timemodel.host import op_host_seconds

        object.__setattr__(self, "host_seconds", op_host_seconds(self.params))

    @classmethod
    def from_spec(cls, spec: GPUSpec, params: Params | None = None) -> DeviceModel:
        """The model of a catalog GPU (``torchplace.catalog.lookup("A100")``)."""
        return cls(
            name=spec.name,
            sms=spec.multiprocessor_count,
            flops=dict(spec.peak_flops),
            bandwidth=float(spec.bandwidth_bytes_per_s),
            arch=arch_of(spec),
            hbm=(spec.memory_bus_width_bits or 4096) >= 1024,
            params=params or load(),
        )

    @property
    def achievable_bandwidth(self) -> float:
        """Bytes/s a streaming kernel sustains (``memory.efficiency`` of the datasheet
        figure on HBM, ``memory.efficiency_gddr`` on GDDR)."""
        key = "memory.efficiency" if self.hbm else "memory.efficiency_gddr"
        return self.bandwidth * self.params[key]

    @property
    def kernel_overhead(self) -> float:
        """Seconds every kernel costs on the GPU besides its work."""
        return self.params["kernel.overhead_seconds"]

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s for a precision; fp32's where the GPU has no own figure
        (TF32 on a V100, bf16 on a T4: the work then runs as float32)."""
        return float(self.flops.get(precision, self.flops["fp32"]))

    def gemm_rate(self, precision: str) -> float:
        """FLOP/s a large product reaches in ``precision``."""
        if precision in _TENSOR_CORE and precision in self.flops:
            return self.peak(precision) * self.params["gemm.tensor_core_efficiency"]
        return self.peak(precision) * self.params["gemm.simt_efficiency"]

    def seconds(self, signature: tuple[Any, ...]) -> tuple[float, str]:
        """(seconds, bound) of a kernel signature, computed once per signature."""
        found = self._cache.get(signature)
        if found is None:
            found = self._price(signature)
            if len(self._cache) >= 1 << 16:  # shapes that never repeat (growing sequences)
                self._cache.clear()
            self._cache[signature] = found
        return found

    def _price(self, sig: tuple[Any, ...]) -> tuple[float, str]:
        kind = sig[0]
        if kind == "mem":
            return memory.memory_seconds(self, sig[1], sig[2])
        if kind == "gemm":
            _, m, n, k, batch, precision, nbytes = sig
            return gemm.gemm_seconds(self, m, n, k, batch, precision, nbytes)
        if kind == "conv":
            return memory.convolution_seconds(self, sig)
        if kind == "attn":
            return attention.attention_seconds(self, sig)
        raise ValueError(f"unknown kernel signature {sig!r}")
