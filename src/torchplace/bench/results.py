"""What a benchmark run produces: rows, break-even sizes, notes; and its JSON schema.

The JSON document (:meth:`BenchResult.to_dict`) is versioned by ``schema_version``; its
keys are tested. Adding a key is compatible; renaming or removing one bumps the
version.

Examples:
    >>> from torchplace.bench.results import ROW_KEYS, SCHEMA_VERSION
    >>> SCHEMA_VERSION, ROW_KEYS[:3]
    (1, ('op', 'size', 'label'))
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from torchplace.cost import Peaks

__all__ = [
    "BREAK_EVEN_KEYS",
    "ROW_KEYS",
    "SCHEMA_VERSION",
    "TOP_KEYS",
    "BenchResult",
    "BreakEven",
    "Row",
]

SCHEMA_VERSION = 1


@dataclass
class Row:
    """One operation at one size on one device.

    Attributes:
        op: ``elementwise``, ``matmul``, ``conv2d``, ``copy_h2d`` or ``copy_d2h``.
        size: the sweep variable (elements, matrix side, image side, or bytes copied).
        label: ``size`` for people.
        dtype: ``fp32``, ``bf16``, ``fp16``; ``None`` for copies.
        tf32: float32 matrix products ran (or are projected) on TF32 tensor cores.
        variant: ``pinned`` or ``pageable`` host memory for copies, else ``None``.
        device: ``cpu``, ``cuda:0``..., or the catalog key of a projected GPU.
        device_name: the device for people.
        projected: ``True`` when the time comes from the cost model, not a measurement.
        seconds: median seconds per call (or the projection).
        iqr_seconds: interquartile range of the measurement (``None`` when projected).
        runs: timed blocks (``None`` when projected).
        flops: FLOPs of one call (PyTorch's counting rules).
        bytes: bytes one call reads and writes.
        metric: ``flops`` when the roofline compares FLOP/s, ``bytes`` when bytes/s.
        peak_fraction: achieved / peak for ``metric`` (``None`` when the peak is unknown).
        peak_source: ``measured`` (the CPU, measured here) or ``catalog`` (datasheet).
        bound: what the cost model says limits it: ``compute``, ``memory``, ``launch``.
        predicted_seconds: the cost model's time for this row's device.
        seconds_with_transfer: for accelerators, the time including copying the inputs
            in and the result out (measured end to end, or projected over the host link).
        speedup: CPU seconds / these seconds for the same operation, size and dtype.
        speedup_with_transfer: CPU seconds / ``seconds_with_transfer``.
        doubt: why the measurement (or the speed-up) is not credible, or ``None``
            (:mod:`torchplace.bench.credibility`).
    """

    op: str
    size: int
    label: str
    dtype: str | None
    tf32: bool
    variant: str | None
    device: str
    device_name: str
    projected: bool
    seconds: float
    iqr_seconds: float | None
    runs: int | None
    flops: float
    bytes: int
    metric: Literal["flops", "bytes"]
    peak_fraction: float | None
    peak_source: Literal["measured", "catalog"] | None
    bound: str | None
    predicted_seconds: float | None
    seconds_with_transfer: float | None = None
    speedup: float | None = None
    speedup_with_transfer: float | None = None
    doubt: str | None = None

    @property
    def achieved(self) -> float:
        """FLOP/s or bytes/s achieved, by :attr:`metric`."""
        work = self.flops if self.metric == "flops" else self.bytes
        return work / self.seconds if self.seconds > 0 else 0.0

    @property
    def precision(self) -> str | None:
        """``dtype``, with ``tf32`` for float32 on TF32 tensor cores."""
        return "tf32" if self.tf32 and self.dtype == "fp32" else self.dtype

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the keys :data:`ROW_KEYS`."""
        d = asdict(self)
        d["achieved_per_s"] = self.achieved
        return d


ROW_KEYS = (*Row.__dataclass_fields__, "achieved_per_s")


@dataclass(frozen=True)
class BreakEven:
    """Where an accelerator starts to beat the CPU once the copies are counted.

    Attributes:
        op: the operation.
        dtype: its dtype key (with ``tf32``).
        tf32: as in :class:`Row`.
        device: the accelerator (or projected GPU).
        device_name: for people.
        projected: as in :class:`Row`.
        status: ``crossover`` (CPU wins below ``size``, the accelerator above),
            ``accelerator_wins`` (at every size measured), ``cpu_wins`` (at every size
            measured), or ``mixed`` (the winner changes more than once).
        size: the interpolated break-even size, in the sweep's unit (``crossover``, and
            ``mixed`` when the accelerator wins at the largest size: the last crossing).
        unit: what ``size`` counts.
        smallest: the smallest size compared.
        largest: the largest size compared.
    """

    op: str
    dtype: str | None
    tf32: bool
    device: str
    device_name: str
    projected: bool
    status: Literal["crossover", "accelerator_wins", "cpu_wins", "mixed"]
    size: float | None
    unit: str
    smallest: int
    largest: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the keys :data:`BREAK_EVEN_KEYS`."""
        return asdict(self)


BREAK_EVEN_KEYS = tuple(BreakEven.__dataclass_fields__)


def _peaks_dict(label: str, p: Peaks) -> dict[str, Any]:
    return {
        "device": label,
        "name": p.name,
        "measured": p.measured,
        "source": p.source,
        "flops_per_s": dict(p.flops_per_s),
        "bandwidth_bytes_per_s": p.bandwidth_bytes_per_s,
        "host_bandwidth_bytes_per_s": p.host_bandwidth_bytes_per_s,
        "launch_seconds": p.launch_seconds,
        "memory_bytes": p.memory_bytes,
    }


@dataclass
class BenchResult:
    """Everything a run measured and projected.

    Attributes:
        machine: the CPU, threads, RAM, torch version, accelerators measured.
        quick: whether the short sweep was used.
        peaks: the peaks each device's rows are compared with, by device label.
        rows: measured and projected rows.
        break_even: one per accelerator (or projected GPU), operation and dtype.
        notes: what was skipped and why, and how to read the numbers.
    """

    machine: dict[str, Any]
    quick: bool
    peaks: dict[str, Peaks] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    break_even: list[BreakEven] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON document (top-level keys :data:`TOP_KEYS`)."""
        from torchplace import __version__

        return {
            "schema_version": SCHEMA_VERSION,
            "torchplace": __version__,
            "machine": self.machine,
            "quick": self.quick,
            "peaks": [_peaks_dict(k, p) for k, p in self.peaks.items()],
            "rows": [r.to_dict() for r in self.rows],
            "break_even": [b.to_dict() for b in self.break_even],
            "notes": list(self.notes),
        }


TOP_KEYS = (
    "schema_version",
    "torchplace",
    "machine",
    "quick",
    "peaks",
    "rows",
    "break_even",
    "notes",
)
