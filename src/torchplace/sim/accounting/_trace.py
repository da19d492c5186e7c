"""The allocation history of a simulation, in order, for timelines, snapshots and replays.

Every block a simulated device allocates and frees, every segment its caching allocator
reserves and releases, every optimizer step and out-of-memory error is recorded with a
sequence number (the order of events across all devices) and the cost model's clock at
that moment. From it come the memory timeline of the HTML report, the snapshot PyTorch's
memory viewer reads, and the replay of one run through other GPUs' allocators.

Allocations are kept in parallel arrays (72 bytes each); past ``limit`` events the trace
stops growing and says where it was cut (the report's peak figures stay exact).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CATEGORY_NAMES", "OP_KINDS", "PHASES", "WORKSPACE", "Trace"]

PHASES = ("other", "forward", "backward", "optimizer")
#: what an operation record's time is priced by: a precision's peak, a host copy, a
#: collective; "sync" marks the host waiting for the GPU (no work of its own)
OP_KINDS = (
    "fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "h2d", "d2h", "nvlink", "network", "sync",
)  # fmt: skip
_PHASE_IDS = {name: i for i, name in enumerate(PHASES)}
_OP_KIND_IDS = {name: i for i, name in enumerate(OP_KINDS)}
#: the scope the cuBLAS workspace is recorded under (its size depends on the GPU)
WORKSPACE = "cuBLAS workspace"
CATEGORY_NAMES = (
    "parameters",
    "gradients",
    "optimizer_state",
    "activations",
    "communication",
    "other",
    "unsharded_parameters",  # FSDP: the gathered full parameters ("parameters": the shards)
)
_CATEGORY_IDS = {name: i for i, name in enumerate(CATEGORY_NAMES)}


@dataclass
class Trace:
    """See the module docstring. Indices returned by :meth:`alloc` identify allocations."""

    limit: int = 2_000_000
    seq: int = 0
    device: array = field(default_factory=lambda: array("h"))
    size: array = field(default_factory=lambda: array("q"))  # requested bytes
    address: array = field(default_factory=lambda: array("q"))
    start: array = field(default_factory=lambda: array("q"))  # seq of the allocation
    end: array = field(default_factory=lambda: array("q"))  # seq of the free, -1 while live
    start_time: array = field(default_factory=lambda: array("d"))  # estimated seconds
    end_time: array = field(default_factory=lambda: array("d"))
    phase: array = field(default_factory=lambda: array("b"))
    category: array = field(default_factory=lambda: array("b"))  # -1 until known
    frame: array = field(default_factory=lambda: array("i"))  # index into frames, -1: none
    scope: array = field(default_factory=lambda: array("i"))  # index into scopes, -1: none
    frames: list[tuple[str, int, str]] = field(default_factory=list)  # file, line, function
    scopes: list[str] = field(default_factory=list)
    segments: list[tuple[int, int, str, int, int, float]] = field(default_factory=list)
    # while torch.cuda.memory._record_memory_history records tracebacks: the Python stacks
    # (frame ids, innermost first) of allocations, of frees (by allocation index) and of
    # segment events (by sequence number)
    stacks: dict[int, tuple[int, ...]] = field(default_factory=dict)
    free_stacks: dict[int, tuple[int, ...]] = field(default_factory=dict)
    segment_stacks: dict[int, tuple[int, ...]] = field(default_factory=dict)
    split_frees: set[int] = field(default_factory=set)
    # with stacks="all": torch's CapturedTraceback of each allocation (Python and C++
    # frames, symbolized when a snapshot asks)
    tracebacks: dict[int, Any] = field(default_factory=dict)
    steps: list[tuple[int, float]] = field(default_factory=list)
    ooms: list[tuple[int, int, int, int]] = field(default_factory=list)
    # every priced operation: device, FLOPs, bytes, precision (or "h2d"/"d2h" for host copies)
    op_device: array = field(default_factory=lambda: array("h"))
    op_flops: array = field(default_factory=lambda: array("d"))
    op_bytes: array = field(default_factory=lambda: array("d"))
    op_kind: array = field(default_factory=lambda: array("b"))  # index into OP_KINDS
    op_seq: array = field(default_factory=lambda: array("q"))
    # its kernel signature (index into signatures, -1: none) and the host's seconds for it:
    # what re-prices it on another GPU (torchplace.timemodel)
    op_signature: array = field(default_factory=lambda: array("i"))
    op_host: array = field(default_factory=lambda: array("d"))
    signatures: list[tuple[Any, ...]] = field(default_factory=list)
    truncated_at: int | None = None
    _frame_ids: dict[tuple[str, int, str], int] = field(default_factory=dict)
    _scope_ids: dict[str, int] = field(default_factory=dict)
    _signature_ids: dict[tuple[Any, ...], int] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        return self.truncated_at is not None

    def _next(self) -> int:
        self.seq += 1
        if self.seq > self.limit and self.truncated_at is None:
            self.truncated_at = self.seq
        return self.seq

    def _intern(self, table: list[Any], ids: dict[Any, int], value: Any) -> int:
        if value is None:
            return -1
        index = ids.get(value)
        if index is None:
            index = ids[value] = len(table)
            table.append(value)
        return index

    def alloc(
        self,
        device: int,
        nbytes: int,
        address: int,
        time: float,
        phase: str,
        scope: str | None,
        frame: tuple[str, int, str] | None,
    ) -> int:
        """Record an allocation; return its index (-1 once the trace is full)."""
        # _next and _intern's common case inlined: every new storage is recorded
        self.seq = seq = self.seq + 1
        if seq > self.limit:
            if self.truncated_at is None:
                self.truncated_at = seq
            return -1
        frame_id = -1 if frame is None else self._frame_ids.get(frame)
        if frame_id is None:
            frame_id = self._intern(self.frames, self._frame_ids, frame)
        scope_id = -1 if scope is None else self._scope_ids.get(scope)
        if scope_id is None:
            scope_id = self._intern(self.scopes, self._scope_ids, scope)
        self.device.append(device)
        self.size.append(nbytes)
        self.address.append(address)
        self.start.append(seq)
        self.end.append(-1)
        self.start_time.append(time)
        self.end_time.append(-1.0)
        self.phase.append(_PHASE_IDS.get(phase, 0))
        self.category.append(-1)
        self.frame.append(frame_id)
        self.scope.append(scope_id)
        return len(self.size) - 1

    def stack(self, frames: list[tuple[str, int, str]]) -> tuple[int, ...]:
        """Frame ids of a Python stack (innermost first)."""
        return tuple(self._intern(self.frames, self._frame_ids, f) for f in frames)

    def free(self, index: int, time: float, category: str | None, stack: Any = None) -> None:
        self.seq = seq = self.seq + 1  # _next, inline: every free is recorded
        if seq > self.limit and self.truncated_at is None:
            self.truncated_at = seq
        if index < 0 or self.end[index] != -1:
            return
        if stack is not None:
            self.free_stacks[index] = self.stack(stack)
        self.end[index] = seq
        self.end_time[index] = time
        if category is not None and self.category[index] == -1:  # set_category, inlined
            self.category[index] = _CATEGORY_IDS[category]

    def set_category(self, index: int, category: str | None) -> None:
        if index >= 0 and category is not None and self.category[index] == -1:
            self.category[index] = _CATEGORY_IDS[category]

    def segment(
        self,
        device: int,
        kind: str,
        address: int,
        size: int,
        time: float,
        stack: Any = None,
        split: bool = False,
    ) -> None:
        seq = self._next()
        if not self.full:
            self.segments.append((seq, device, kind, address, size, time))
            if split:  # a segment_free of a segment that lost its context when first split
                self.split_frees.add(seq)
            if isinstance(stack, list):
                self.segment_stacks[seq] = self.stack(stack)
            elif stack is not None:  # a CapturedTraceback (stacks="all")
                self.tracebacks[-seq] = stack

    def op(
        self,
        device: int,
        flops: float,
        nbytes: float,
        kind: str,
        signature: tuple[Any, ...] | None = None,
        host: float = 0.0,
    ) -> None:
        """Record a priced operation (after the trace is full, operations are still kept:
        they are small, and the time estimates of other GPUs need all of them)."""
        self.op_device.append(device)
        self.op_flops.append(flops)
        self.op_bytes.append(nbytes)
        self.op_kind.append(_OP_KIND_IDS[kind])
        self.op_seq.append(self.seq)
        index = -1 if signature is None else self._signature_ids.get(signature, -1)
        if index < 0 and signature is not None:
            index = self._signature_ids[signature] = len(self.signatures)
            self.signatures.append(signature)
        self.op_signature.append(index)
        self.op_host.append(host)

    def step(self, time: float) -> None:
        self.steps.append((self._next(), time))

    def oom(self, device: int, nbytes: int, frame: tuple[str, int, str] | None) -> None:
        seq = self._next()
        self.ooms.append((seq, device, nbytes, self._intern(self.frames, self._frame_ids, frame)))

    def category_of(self, index: int) -> str:
        """The allocation's category: as classified, else by the phase that made it."""
        c = self.category[index]
        if c >= 0:
            return CATEGORY_NAMES[c]
        return "activations" if PHASES[self.phase[index]] in ("forward", "backward") else "other"

    def __len__(self) -> int:
        return len(self.size)
