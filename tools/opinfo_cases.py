"""PyTorch's OpInfo samples as cases, one definition for the generator and the sweep.

``tools/gen_cuda_ops.py`` runs these cases on a CUDA build (host code only) to learn what
CUDA does; ``benchmarks/opinfo_sweep.py`` runs the same cases on a simulated GPU and
compares. Both must see the same samples: they are made on the CPU from a fixed seed, the
first :data:`SAMPLES` of each (operator, dtype), and moved to the device afterwards (so the
values the host code reads are real, not a kernel's output).

The samples come from ``torch.testing._internal.common_methods_invocations.op_db``, which
ships in every torch wheel (it imports ``expecttest``).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

__all__ = [
    "DTYPES",
    "HASH_SEED",
    "MIXING_POSITIONS",
    "MIXING_SAMPLES",
    "SAMPLES",
    "call",
    "fingerprint",
    "key",
    "moved",
    "ops",
    "outputs",
    "samples",
    "tensor_count",
]

#: the dtypes each operator is tried in: those OpInfo's test_dtypes tries, and float8
DTYPES = (
    "float32", "float64", "float16", "bfloat16", "complex32", "complex64", "complex128",
    "bool", "uint8", "int8", "int16", "int32", "int64", "float8_e4m3fn", "float8_e5m2",
)  # fmt: skip
SAMPLES = 8  # samples per (operator, dtype)
MIXING_SAMPLES = 2  # samples (of two tensors or more) per operator tried with one on the host
MIXING_POSITIONS = 4  # tensors per sample tried on the host, in order


#: PYTHONHASHSEED for every process that makes samples: some sample functions iterate over a
#: set of strings (meshgrid's ``{'xy', 'ij'}``), whose order follows the strings' hashes,
#: which Python randomises per process unless this is set
HASH_SEED = "0"
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def ops() -> list[Any]:
    """OpInfo's operators (dense strided tensors: sparse layouts are not simulated)."""
    from torch.testing._internal.common_methods_invocations import op_db

    return list(op_db)


def key(op: Any) -> str:
    """``name|variant``: the operator's name in the data files."""
    return f"{op.name}|{op.variant_test_name}"


def samples(op: Any, dtype: str) -> list[Any]:
    """The first :data:`SAMPLES` samples of ``op`` in ``dtype``, made on the CPU from seed 0."""
    torch.manual_seed(0)
    return list(itertools.islice(op.sample_inputs("cpu", getattr(torch, dtype)), SAMPLES))


def fingerprint(sample: Any) -> str:
    """A short digest of what a sample passes, values and dtypes left out (each tensor's
    shape and strides; every other argument's repr): the generator records it with each
    sample's outcome, so a sample is matched with CUDA's outcome for the same call even
    where two processes made the samples in another order (see :data:`HASH_SEED`). The
    samples of one operator have the same digests in every dtype, which the data's gzip
    stores once."""

    def describe(a: Any) -> str:
        if isinstance(a, torch.Tensor):
            strides = a.stride() if a.layout == torch.strided else a.layout
            return f"T({tuple(a.shape)},{strides})"  # the dtype: the same in every dtype's
        if isinstance(a, (list, tuple)):
            return "[" + ",".join(describe(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ",".join(f"{k}:{describe(v)}" for k, v in sorted(a.items())) + "}"
        if isinstance(a, (set, frozenset)):
            return "{" + ",".join(sorted(describe(x) for x in a)) + "}"
        return _ADDRESS.sub("", repr(a))

    text = describe([sample.input, list(sample.args), sample.kwargs])
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def tensor_count(sample: Any) -> int:
    """How many tensors a sample passes (its input, positional and keyword arguments), in
    the order ``SampleInput.transform`` visits them."""
    found: list[None] = []

    def count(t: Any) -> Any:
        if isinstance(t, torch.Tensor):
            found.append(None)
        return t

    sample.transform(count)
    return len(found)


def moved(sample: Any, device: str, host: int | None = None) -> Any:
    """The sample on ``device``: every tensor moved there but the ``host``-th (counted as
    :func:`tensor_count` counts), and a ``device="cpu"`` argument made ``device``."""
    seen = itertools.count()

    def move(t: Any) -> Any:
        if isinstance(t, torch.Tensor):
            return t if next(seen) == host else t.to(device)
        return t

    out = sample.transform(move)
    if "device" in out.kwargs and str(out.kwargs["device"]).startswith("cpu"):
        out.kwargs["device"] = device
    return out


def call(op: Any, sample: Any) -> Any:
    """Run the operator's function variant on a sample."""
    return op.op(sample.input, *sample.args, **sample.kwargs)


def outputs(out: Any) -> list[list[Any]]:
    """``[shape, dtype, device]`` of each tensor a call returned, in order."""
    leaves: Iterator[Any] = iter(tree_flatten(out)[0])
    return [
        [list(t.shape), str(t.dtype).removeprefix("torch."), str(t.device)]
        for t in leaves
        if isinstance(t, torch.Tensor)
    ]
