"""Re-price recorded operations on another GPU.

A simulation records each operation's kernel signature, its host time and its kind
(:class:`torchplace.sim.accounting._trace.Trace`); replaying that record through another GPU's
:class:`~torchplace.timemodel.device.DeviceModel` gives the same run's time there, queue
of host and GPU included (:class:`torchplace.cost.StepEstimate`), without running the
script again. ``torchplace sim --gpu all`` and ``benchmarks/timing_accuracy.py`` do this.

Examples:
    >>> from torchplace import catalog
    >>> from torchplace.timemodel import DeviceModel
    >>> from torchplace.timemodel.replay import Op, replay
    >>> ops = [Op("bf16", ("gemm", 4096, 4096, 4096, 1, "bf16", 100_663_296), 1e-5)] * 10
    >>> a100, h100 = (DeviceModel.from_spec(catalog.lookup(n)) for n in ("A100", "H100"))
    >>> replay(ops, a100).estimate.seconds > replay(ops, h100).estimate.seconds
    True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from torchplace.cost import OpCost, StepEstimate
from torchplace.timemodel import comm
from torchplace.timemodel.device import DeviceModel

__all__ = ["Link", "Op", "Replayed", "price_op", "replay"]


class Op(NamedTuple):
    """One recorded operation.

    Attributes:
        kind: the trace's kind: a precision key, ``"h2d"``/``"d2h"`` (a host copy),
            ``"nvlink"``/``"network"`` (a collective's bus bytes) or ``"sync"``.
        signature: its kernel signature (``None`` for copies, collectives, syncs).
        host: the host's seconds for it when recorded (0: it costs the host nothing; else
            the replaying model's own figure per operation is charged).
        nbytes: bytes moved (a copy's, a collective's bus bytes).
        flops: its FLOPs (for the totals).
    """

    kind: str
    signature: tuple[Any, ...] | None
    host: float = 0.0
    nbytes: float = 0.0
    flops: float = 0.0


class Link(NamedTuple):
    """The links a replay prices copies and collectives over (bytes/s per direction)."""

    host: float = 32e9
    gpu: float = 300e9
    network: float = 50e9


class Replayed(NamedTuple):
    """What :func:`replay` gives: the run's estimate, and its ``(clock, GPU busy, host)``
    marks at the start, at each index asked for, and at the end."""

    estimate: StepEstimate
    marks: list[tuple[float, float, float]]


def price_op(op: Op, model: DeviceModel, link: Link, *, host_scale: float = 1.0) -> OpCost:
    """``op`` on ``model``'s GPU as an :class:`~torchplace.cost.OpCost`."""
    # the host's time per operation under this model's constants (the record's is under
    # the constants it was simulated with)
    host = model.host_seconds * host_scale if op.host else 0.0
    if op.signature is not None:
        seconds, bound = model.seconds(op.signature)
        return OpCost("kernel", op.flops, int(op.nbytes), seconds, bound, op.kind, host)  # type: ignore[arg-type]
    if op.kind in ("h2d", "d2h"):
        seconds = op.nbytes / link.host + model.kernel_overhead
        return OpCost(f"copy {op.kind}", 0.0, int(op.nbytes), seconds, "memory", op.kind, host)
    if op.kind in ("nvlink", "network"):
        bandwidth = link.network if op.kind == "network" else link.gpu
        seconds = comm.collective_seconds(op.nbytes, bandwidth, model.params, model.kernel_overhead)
        return OpCost("nccl", 0.0, int(op.nbytes), seconds, "communication", op.kind, host)
    # a record without a signature (made without a time model): the roofline
    compute = op.flops / model.peak(op.kind) if op.flops else 0.0
    memory = op.nbytes / model.achievable_bandwidth
    bound = "compute" if compute > memory else "memory"
    return OpCost("kernel", op.flops, int(op.nbytes), max(compute, memory) + model.kernel_overhead,
                  bound, op.kind, host)  # type: ignore[arg-type]  # fmt: skip


def replay(
    ops: Iterable[Op],
    model: DeviceModel,
    link: Link | None = None,
    *,
    host_scale: float = 1.0,
    marks: Iterable[int] | None = None,
) -> Replayed:
    """The operations priced on ``model`` and queued as eager PyTorch runs them.

    Args:
        ops: the recorded operations, in order.
        model: the GPU.
        link: host, GPU-to-GPU and network bandwidths (the GPU's catalog row's).
        host_scale: a factor on the host's time (0: kernels issued from a CUDA graph).
        marks: ascending operation indices at which to take a mark (before the operation
            of that index).
    """
    link = link or Link()
    est = StepEstimate()
    taken = [est.mark()]
    pending = list(marks) if marks is not None else []
    pending.reverse()
    for i, op in enumerate(ops):
        while pending and i >= pending[-1]:
            pending.pop()
            taken.append(est.mark())
        if op.kind == "sync":
            est.sync()
            continue
        est.add(price_op(op, model, link, host_scale=host_scale))
    taken += [est.mark()] * len(pending)
    taken.append(est.mark())
    return Replayed(est, taken)
