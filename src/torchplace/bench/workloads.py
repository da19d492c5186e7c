"""The operations ``torchplace bench`` times, each over a sweep of sizes.

- ``elementwise``: ``a * b + c`` on three vectors of ``size`` elements, memory-bound
  (eager PyTorch runs it as two kernels, so 6 vectors' worth of bytes move).
- ``matmul``: ``a @ b`` of two ``size``×``size`` matrices, compute-bound.
- ``conv2d``: a 3×3 convolution, 64 to 64 channels, batch 8, on ``size``×``size``
  images (padding 1), compute-bound for all but the smallest images.

FLOPs and bytes come from the cost model (:func:`torchplace.cost.estimate` on meta
tensors), so measured and projected rows count work the same way.

Examples:
    >>> import torch
    >>> from torchplace.bench.workloads import Workload
    >>> w = Workload("matmul", 256, torch.float32)
    >>> w.label, w.input_bytes, w.output_bytes
    ('256×256', 524288, 262144)
    >>> a, b = w.inputs(torch.device("meta"))
    >>> w(a, b).shape
    torch.Size([256, 256])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["COPY_SIZES", "OPS", "PRECISIONS", "SIZES", "Workload", "dtype_of", "sizes"]

#: The operations, in report order.
OPS = ("elementwise", "matmul", "conv2d")

#: Precisions each operation is timed in, where the device has them.
PRECISIONS: dict[str, tuple[str, ...]] = {
    "elementwise": ("fp32",),
    "matmul": ("fp32", "tf32", "bf16", "fp16"),
    "conv2d": ("fp32",),
}

#: Sizes per operation: (full sweep, ``--quick`` sweep).
SIZES: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "elementwise": (tuple(2**k for k in range(12, 27, 2)), (2**12, 2**16, 2**20, 2**23)),
    "matmul": ((64, 128, 256, 512, 1024, 2048, 4096), (64, 256, 1024)),
    "conv2d": ((8, 16, 32, 64, 128), (8, 32)),
}

#: Host↔device copy sizes in bytes: (full sweep, ``--quick`` sweep).
COPY_SIZES: tuple[tuple[int, ...], tuple[int, ...]] = (
    tuple(2**k for k in range(12, 31, 2)),
    (2**12, 2**20, 2**26),
)

_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}

_BATCH, _CHANNELS = 8, 64


def sizes(op: str, *, quick: bool = False, limit: int | None = None) -> tuple[int, ...]:
    """The sweep for ``op`` (``"copy"`` for host↔device copies), at most ``limit`` long."""
    full, short = COPY_SIZES if op == "copy" else SIZES[op]
    chosen = short if quick else full
    return chosen if limit is None else chosen[:limit]


def dtype_of(precision: str) -> torch.dtype:
    """The tensor dtype of a precision key (``"tf32"`` computes on float32 tensors)."""
    return _DTYPES[precision]


def _pow2(n: int) -> str:
    k = int(math.log2(n))
    return f"2^{k}" if 2**k == n else str(n)


@dataclass(frozen=True)
class Workload:
    """One operation at one size and dtype.

    Attributes:
        op: one of :data:`OPS`.
        size: elements per vector (elementwise), matrix side (matmul) or image side
            (conv2d).
        dtype: the tensors' dtype.
    """

    op: str
    size: int
    dtype: torch.dtype

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown operation {self.op!r}; choose from {', '.join(OPS)}.")
        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size} for {self.op}.")

    @property
    def label(self) -> str:
        """The size, for people: elements per vector, each matrix, the input batch."""
        n = self.size
        if self.op == "elementwise":
            return f"{_pow2(n)} elements"
        if self.op == "matmul":
            return f"{n}×{n}"
        return f"{_BATCH}×{_CHANNELS}×{n}×{n}"

    def _shapes(self) -> list[tuple[int, ...]]:
        n = self.size
        if self.op == "elementwise":
            return [(n,), (n,), (n,)]
        if self.op == "matmul":
            return [(n, n), (n, n)]
        return [(_BATCH, _CHANNELS, n, n), (_CHANNELS, _CHANNELS, 3, 3)]

    @property
    def input_bytes(self) -> int:
        """Bytes of the inputs (what a host→device copy moves)."""
        return sum(math.prod(s) for s in self._shapes()) * self.dtype.itemsize

    @property
    def output_bytes(self) -> int:
        """Bytes of the result (what a device→host copy moves)."""
        n = self.size
        elements = {"elementwise": n, "matmul": n * n, "conv2d": _BATCH * _CHANNELS * n * n}
        return elements[self.op] * self.dtype.itemsize

    @property
    def memory_bytes(self) -> int:
        """Bytes the operation needs at once: inputs, result and temporaries."""
        temporaries = self.output_bytes if self.op == "elementwise" else 0  # a * b
        return self.input_bytes + self.output_bytes + temporaries

    @property
    def compute_bound(self) -> bool:
        """Whether the roofline metric is FLOP/s (else bytes/s)."""
        return self.op != "elementwise"

    def inputs(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        """Random inputs on ``device`` (no data on ``meta``)."""
        return tuple(torch.randn(s, dtype=self.dtype, device=device) for s in self._shapes())

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Run the operation on ``inputs`` (from :meth:`inputs`)."""
        if self.op == "elementwise":
            a, b, c = inputs
            return a * b + c
        if self.op == "matmul":
            a, b = inputs
            return a @ b
        x, w = inputs
        return F.conv2d(x, w, padding=1)
