"""Which GPUs a run fits on, from one execution: replay and re-pricing of its trace.

A simulation records every allocation and free in order, and every priced operation
(:mod:`torchplace.sim.accounting._trace`). The memory of the same run on another GPU is that stream
replayed through the other GPU's caching-allocator model (its capacity, CUDA context and
cuBLAS workspace); its time is the same operations priced by the other GPU's roofline.
That is exact for GPUs on which the script takes the same path — the same kernels and
the same allocations. Kernel choices that depend on the GPU (whether SDPA has a fused
attention kernel there, or falls back to the math kernel) change the stream, so the
command line runs the script once per *behaviour class* of GPUs (:func:`classes`) that
the script's choices tell apart, and replays within each class.

Examples:
    >>> import torch, torchplace
    >>> from torchplace import catalog
    >>> from torchplace.sim import plan
    >>> with torchplace.simulate("H100", values="placeholder") as report:
    ...     x = torch.empty(20 * 1024**3, dtype=torch.uint8, device="cuda")
    >>> results = plan.replay_all(report.state, [catalog.lookup("T4"), catalog.lookup("H100")])
    >>> [(r.key, r.fits) for r in results]
    [('t4', False), ('h100-sxm-80gb', True)]
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from torchplace.sim.accounting._trace import OP_KINDS, WORKSPACE, Trace
from torchplace.sim.allocator import CachingAllocatorModel

if TYPE_CHECKING:
    from torchplace.catalog import GPUSpec
    from torchplace.sim.accounting._state import SimState

__all__ = ["GPUResult", "behaviour", "classes", "price", "price_steps", "replay", "replay_all"]

_MIB = 1024**2


def behaviour(spec: GPUSpec) -> tuple[Any, ...]:
    """What in a GPU changes the path a script takes (GPUs that agree share a run).

    The attention kernel ``scaled_dot_product_attention`` picks
    (:func:`torchplace.sim.rules._device_rules.attention_kernels`); other differences
    (capacity, CUDA context, cuBLAS workspace, peaks) are replayed or re-priced. A script
    that reads the GPU's properties and branches on them is assumed to take the run's path
    (the report says so).
    """
    from torchplace.sim.rules._device_rules import attention_kernels

    # the fused kernels keep different tensors for backward (the output and its log-sum-exp,
    # padded or not), and the math kernel the attention matrix: GPUs that pick the same
    # kernels share a run
    return (attention_kernels(spec),)


def classes(specs: list[GPUSpec]) -> list[list[GPUSpec]]:
    """Group GPUs by :func:`behaviour`, largest memory first in each group (the group's
    run is made on it, so a smaller GPU of the group runs out at or before its point)."""
    groups: dict[tuple[Any, ...], list[GPUSpec]] = {}
    for spec in specs:
        groups.setdefault(behaviour(spec), []).append(spec)
    return [sorted(g, key=lambda s: -s.torch_total_bytes) for g in groups.values()]


@dataclass
class GPUResult:
    """One GPU's verdict for a recorded run (bytes and seconds)."""

    key: str
    name: str
    devices: int
    capacity_bytes: int
    context_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    headroom_bytes: int
    fits: bool
    oom: dict[str, Any] | None = None  # device, requested_bytes, file, line
    estimated_step_seconds: float | None = None
    estimated_total_seconds: float = 0.0
    per_device: list[dict[str, Any]] = field(default_factory=list)
    #: the slowest device's step summary (torchplace.timemodel.step.summarize)
    step: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _workspace(spec: GPUSpec) -> int:
    from torchplace.sim.accounting._state import cublas_workspace_bytes

    return cublas_workspace_bytes(spec)


def replay(
    trace: Trace,
    spec: GPUSpec,
    *,
    device: int,
    capacity: int | None = None,
    context_bytes: int | None = None,
) -> dict[str, Any]:
    """Replay one device's allocations through ``spec``'s caching-allocator model.

    Returns:
        ``peak_allocated_bytes``, ``peak_reserved_bytes``, ``capacity_bytes``,
        ``context_bytes`` and ``oom`` (None, or the failing request with its frame).
    """
    from torchplace.sim.accounting._state import context_bytes_for

    cap = spec.torch_total_bytes if capacity is None else capacity
    ctx = context_bytes_for(spec) if context_bytes is None else context_bytes
    model = CachingAllocatorModel(cap, reserved_outside=ctx, device_index=device)
    events: list[tuple[int, int, int]] = []  # (seq, +1 alloc / -1 free, allocation index)
    workspace = trace._scope_ids.get(WORKSPACE, -2)
    for i in range(len(trace)):
        if trace.device[i] != device:
            continue
        events.append((trace.start[i], 1, i))
        if trace.end[i] >= 0:
            events.append((trace.end[i], -1, i))
    events.sort()
    handles: dict[int, int] = {}
    oom = None
    for _, kind, i in events:
        if kind < 0:
            if i in handles:
                model.free(handles.pop(i))
            continue
        size = _workspace(spec) if trace.scope[i] == workspace else trace.size[i]
        try:
            handles[i] = model.malloc(size)
        except RuntimeError as e:  # AllocatorOOM
            frame = trace.frames[trace.frame[i]] if trace.frame[i] >= 0 else None
            oom = {
                "device": device,
                "requested_bytes": int(getattr(e, "requested", size)),
                "file": frame[0] if frame else None,
                "line": frame[1] if frame else None,
            }
            break
    return {
        "capacity_bytes": cap,
        "context_bytes": ctx,
        "peak_allocated_bytes": model.peak_allocated_bytes,
        "peak_reserved_bytes": model.peak_reserved_bytes,
        "oom": oom,
    }


def price(trace: Trace, spec: GPUSpec, *, device: int) -> tuple[float, float | None]:
    """The recorded operations of one device priced on ``spec``: (total seconds, median
    seconds per step — the work between two optimizer steps — or None without steps)."""
    total, step = price_steps(trace, spec, device=device)
    return total, step.get("step_seconds")


def price_steps(
    trace: Trace,
    spec: GPUSpec,
    *,
    device: int,
    batches: list[tuple[float, ...]] | None = None,
) -> tuple[float, dict[str, Any]]:
    """The recorded operations of one device re-priced on ``spec`` by the step-time model
    (:mod:`torchplace.timemodel.replay`): (total seconds, the step summary of
    :func:`torchplace.timemodel.step.summarize`, empty without steps). ``batches`` are the
    run's ``(samples, tokens)`` seen at each step mark (the throughput)."""
    from torchplace.timemodel import DeviceModel
    from torchplace.timemodel.replay import Link, Op, replay
    from torchplace.timemodel.step import summarize

    model = DeviceModel.from_spec(spec)
    link = Link(
        host=float(spec.host_bandwidth_bytes_per_s),
        gpu=float(spec.gpu_link_bandwidth_bytes_per_s or spec.host_bandwidth_bytes_per_s),
    )
    signatures = trace.signatures
    ops: list[Op] = []
    indices = []  # the trace's index of each op kept
    for i in range(len(trace.op_seq)):
        if trace.op_device[i] != device:
            continue
        sig = trace.op_signature[i] if i < len(trace.op_signature) else -1
        ops.append(Op(OP_KINDS[trace.op_kind[i]], signatures[sig] if sig >= 0 else None,
                      trace.op_host[i] if i < len(trace.op_host) else 0.0,
                      trace.op_bytes[i], trace.op_flops[i]))  # fmt: skip
        indices.append(trace.op_seq[i])
    # a step ends at each optimizer step's sequence number: its index among the ops kept
    step_at = [bisect.bisect_left(indices, seq) for seq, _ in trace.steps]
    result = replay(ops, model, link, marks=step_at)
    est = result.estimate
    seen = batches or []
    marks = [
        (*m, *(seen[i] if i < len(seen) else (0, 0)))
        for i, m in enumerate(result.marks[: len(step_at) + 1])
    ]
    return est.seconds, summarize(marks, [], est.total.seconds_by_bound, model.params)


def replay_all(
    state: SimState,
    specs: list[GPUSpec],
    *,
    capacity: int | None = None,
    context_bytes: int | None = None,
) -> list[GPUResult]:
    """Every GPU of ``specs`` for the run ``state`` recorded (same number of devices)."""
    trace = state.trace
    results = []
    for spec in specs:
        per_device = []
        for dev in range(len(state.devices)):
            r = replay(trace, spec, device=dev, capacity=capacity, context_bytes=context_bytes)
            seen = [tuple(m[3:5]) for m in state.devices[dev].time_marks]
            total, step = price_steps(trace, spec, device=dev, batches=seen)
            r.update(
                device=dev,
                estimated_total_seconds=total,
                estimated_step_seconds=step.get("step_seconds"),
                step=step,
            )
            per_device.append(r)
        oom = next((d["oom"] for d in per_device if d["oom"]), None)
        worst = max(per_device, key=lambda d: d["peak_reserved_bytes"])
        steps = [d["estimated_step_seconds"] for d in per_device if d["estimated_step_seconds"]]
        results.append(
            GPUResult(
                key=spec.key,
                name=spec.name,
                devices=len(per_device),
                capacity_bytes=worst["capacity_bytes"],
                context_bytes=worst["context_bytes"],
                peak_allocated_bytes=max(d["peak_allocated_bytes"] for d in per_device),
                peak_reserved_bytes=worst["peak_reserved_bytes"],
                headroom_bytes=worst["capacity_bytes"]
                - worst["context_bytes"]
                - worst["peak_reserved_bytes"],
                fits=oom is None,
                oom=oom,
                estimated_step_seconds=max(steps) if steps else None,
                estimated_total_seconds=max(d["estimated_total_seconds"] for d in per_device),
                per_device=per_device,
                step=max(per_device, key=lambda d: d.get("estimated_step_seconds") or 0.0).get(
                    "step", {}
                ),
            )
        )
    return results
