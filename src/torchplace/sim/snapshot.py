"""A simulated run as a CUDA memory snapshot: the format ``torch.cuda.memory._snapshot()``
returns, which ``python -m torch.cuda._memory_viz`` and PyTorch's web memory viewer read.

- ``segments``: the caching-allocator model's segments and blocks at the end of the run
  (or at the moment ``torch.cuda.memory._snapshot()`` is called inside a simulation), each
  live block with the frame of the user's line that allocated it.
- ``device_traces``: per device, the allocator's actions in order — ``segment_alloc``,
  ``alloc``, ``free_requested``, ``free_completed``, ``segment_free``, ``oom`` — with
  address, size, the user's frame and a time stamp in microseconds of the cost model's
  clock. Inside a simulation they cover the events recorded while
  ``torch.cuda.memory._record_memory_history()`` was on; ``torchplace sim --snapshot``
  writes the whole run.

Examples:
    >>> import torch, torchplace
    >>> from torchplace.sim.snapshot import snapshot
    >>> with torchplace.simulate("H100", values="placeholder") as report:
    ...     torch.cuda.memory._record_memory_history()
    ...     x = torch.empty(1024, device="cuda")
    ...     s = torch.cuda.memory._snapshot()
    >>> [e["action"] for e in s["device_traces"][0]]
    ['segment_alloc', 'alloc']
    >>> s["segments"][0]["blocks"][0]["size"]
    4096
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchplace._output import write_atomic

if TYPE_CHECKING:
    from torchplace.sim.accounting._state import SimState

__all__ = ["MemoryHistory", "dump", "snapshot"]


def _symbolize(state: SimState) -> None:
    """Turn the CapturedTracebacks kept with stacks="all" into frame-id stacks (torch's
    symbolize_tracebacks, as c10's snapshot does), without the simulator's own frames."""
    trace = state.trace
    if not trace.tracebacks:
        return
    from torch._C._profiler import symbolize_tracebacks

    indices = list(trace.tracebacks)
    symbolized = symbolize_tracebacks([trace.tracebacks.pop(i) for i in indices])
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for i, frames in zip(indices, symbolized, strict=True):
        # an allocation's index, or a segment event's sequence number, negated
        (trace.stacks if i >= 0 else trace.segment_stacks)[abs(i)] = trace.stack(
            [
                (f["filename"], int(f["line"]), f["name"])
                for f in frames
                if not str(f["filename"]).startswith(own)
            ]
        )


def _frames(state: SimState, index: int, stack: Any = None) -> list[dict[str, Any]]:
    """An event's frames: its whole Python stack where one was kept (while a memory history
    recorded tracebacks), else the user's frame."""
    frames = state.trace.frames
    ids = stack if stack is not None else ((index,) if index >= 0 else ())
    return [
        {"filename": f[0], "line": f[1], "name": f[2] if len(f) > 2 else ""}
        for f in (frames[i] for i in ids)
    ]


#: What ``_record_memory_history(context=...)`` records tracebacks for (torch/cuda/memory.py):
#: blocks still allocated ("state"), alloc events too ("alloc"), free events too ("all").
_BLOCK_CONTEXTS = ("state", "alloc", "all")
_ALLOC_CONTEXTS = ("alloc", "all")


@dataclass
class _Range:
    start: int  # trace sequence numbers, inclusive; end None: still on
    end: int | None
    value: str | None  # what was recorded from `start` on

    def holds(self, seq: int) -> bool:
        return self.start <= seq and (self.end is None or seq <= self.end)


@dataclass
class MemoryHistory:
    """What ``torch.cuda.memory._record_memory_history`` asked to record, and since when.

    As the caching allocator keeps it (c10/cuda/CUDACachingAllocator.cpp ``recordHistory``):
    ``enabled="all"`` keeps alloc/free events for ``device_traces`` (at most ``max_entries``,
    the latest), ``"state"`` only what is allocated now; turning it off (``None``) or
    ``clear_history`` drops the events kept so far. ``context`` says which of them carry the
    user's frame: live blocks (``"state"``), alloc events (``"alloc"``), free events too
    (``"all"``); a block keeps the frame it was allocated with.
    """

    events: list[_Range] = field(default_factory=list)  # when events were kept
    contexts: list[_Range] = field(default_factory=list)  # when tracebacks were recorded
    max_entries: int | None = None
    skip: frozenset[str] = frozenset()
    # torch.cuda.memory._set_memory_metadata: (from trace sequence number, the string)
    metadata: list[tuple[int, str]] = field(default_factory=list)

    def metadata_at(self, seq: int) -> str:
        """The user metadata in force at trace sequence number ``seq`` ("" if none)."""
        value = ""
        for start, text in self.metadata:
            if start > seq:
                break
            value = text
        return value

    def record(
        self,
        seq: int,
        enabled: str | None,
        context: str | None = "all",
        *,
        max_entries: int | None = None,
        clear: bool = False,
        skip: Any = (),
    ) -> None:
        """The history setting from trace sequence number ``seq`` on."""
        for ranges in (self.events, self.contexts):
            if ranges and ranges[-1].end is None:
                ranges[-1].end = seq
        if enabled is None or clear:
            self.events.clear()
        if enabled is not None:
            self.events.append(_Range(seq + 1, None, enabled))
            self.contexts.append(_Range(seq + 1, None, context))
            self.max_entries = max_entries
            self.skip = frozenset(skip or ())

    @staticmethod
    def _at(ranges: list[_Range], seq: int) -> str | None:
        for r in reversed(ranges):
            if r.holds(seq):
                return r.value
        return None

    def kept(self, seq: int) -> bool:
        return self._at(self.events, seq) == "all"

    def context(self, seq: int) -> str | None:
        return self._at(self.contexts, seq)


def snapshot(
    state: SimState,
    *,
    history: MemoryHistory | None = None,
    pool: tuple[int, int] | None = None,
    include_traces: bool = True,
) -> dict[str, Any]:
    """The snapshot dict of a simulation (see the module docstring).

    Args:
        state: the simulation's state.
        history: what ``_record_memory_history`` recorded (None: every event, every frame).
        pool: only the segments of this memory pool (``MemPool.id``, a graph's pool).
        include_traces: whether ``device_traces`` lists the events.
    """
    state.sync()
    trace = state.trace

    def context(seq: int, wanted: tuple[str, ...]) -> bool:
        return history is None or history.context(seq) in wanted

    def kept(seq: int) -> bool:
        return include_traces and (history is None or history.kept(seq))

    _symbolize(state)

    def allocated_with(i: int) -> list[dict[str, Any]]:
        """The frames of allocation ``i``'s block (c10's context_when_allocated: gathered
        while the context was "state" or more)."""
        if not context(trace.start[i], _BLOCK_CONTEXTS):
            return []
        return _frames(state, trace.frame[i], trace.stacks.get(i))

    live = {(rec.device, rec.handle): rec.trace_index for rec in state.storages.values()}
    made: dict[tuple[int, int], tuple[int, ...]] = {}  # a live segment's allocation stack
    segment_events = []
    for seq, device, kind, address, size, time in trace.segments:
        # c10's record_trace gives an event the context when it is "alloc" or "all": a
        # segment's own (the allocation that made it, the call that freed it, gathered only
        # with "all"), else for a segment_free the one it was allocated with, which a
        # segment keeps only while it has never been split (allocator.split_segments)
        stack = trace.segment_stacks.get(seq)
        if kind == "segment_alloc":
            if stack is not None:
                made[(device, address)] = stack
            else:
                made.pop((device, address), None)
        elif kind == "segment_free":
            allocated = made.pop((device, address), None)
            if not context(seq, ("all",)) or stack is None:
                stack = None if seq in trace.split_frees else allocated
        if kept(seq):
            frames = _frames(state, -1, stack) if stack and context(seq, _ALLOC_CONTEXTS) else []
            segment_events.append((seq, _event(device, kind, address, size, time, frames)))
    segments = []
    for dev in state.devices:
        for seg in dev.allocator.snapshot():
            if pool is not None and tuple(seg["segment_pool_id"]) != tuple(pool):
                continue
            stack = made.get((dev.index, seg["address"]))
            if stack is not None and seg["address"] not in dev.allocator.split_segments:
                seg["frames"] = _frames(state, -1, stack)
            for block in seg["blocks"]:
                index = live.get((dev.index, block["address"]))
                if index is not None and index >= 0:
                    frames = allocated_with(index)
                    if frames:
                        block["frames"] = frames
            segments.append(seg)
    events: list[tuple[int, dict[str, Any]]] = segment_events
    for i in range(len(trace)):
        device, size, address = trace.device[i], trace.size[i], trace.address[i]
        start, end = trace.start[i], trace.end[i]
        if kept(start):
            frames = allocated_with(i) if context(start, _ALLOC_CONTEXTS) else []
            events.append(
                (start, _event(device, "alloc", address, size, trace.start_time[i], frames))
            )
        if end >= 0 and kept(end):
            # c10's free: the free's own context with "all", else the block's allocation one
            frames = []
            if context(end, _ALLOC_CONTEXTS):
                stack = trace.free_stacks.get(i)
                frames = _frames(state, -1, stack) if stack else allocated_with(i)
            for action in ("free_requested", "free_completed"):
                events.append(
                    (end, _event(device, action, address, size, trace.end_time[i], frames))
                )
    for seq, device, size, frame in trace.ooms:
        if kept(seq):
            frames = _frames(state, frame) if context(seq, _ALLOC_CONTEXTS) else []
            oom = _event(device, "oom", 0, size, 0.0, frames)
            oom["device_free"] = state.devices[device].allocator.device_free_bytes
            events.append((seq, oom))
    events.sort(key=lambda e: e[0])
    traces: list[list[dict[str, Any]]] = [[] for _ in state.devices]
    skip = history.skip if history is not None else frozenset()
    for seq, event in events:
        if event["device"] < len(traces) and event["action"] not in skip:
            # each trace entry carries the user metadata set when it was recorded
            event["user_metadata"] = history.metadata_at(seq) if history is not None else ""
            traces[event.pop("device")].append(event)
    if history is not None and history.max_entries is not None:
        traces = [t[-history.max_entries :] if history.max_entries > 0 else t[-1:] for t in traces]
    return {
        "segments": segments,
        "device_traces": traces,
        "allocator_settings": {"expandable_segments": False, "max_split_size": -1},
    }


def _event(
    device: int, action: str, address: int, size: int, seconds: float, frames: list[Any]
) -> dict[str, Any]:
    return {
        "device": device,
        "action": action,
        "addr": address,
        "size": size,
        "stream": 0,
        "time_us": int(seconds * 1e6),
        "frames": frames,
    }


def dump(data: dict[str, Any], path: str | Path) -> None:
    """Write a snapshot as ``torch.cuda.memory._dump_snapshot`` does (a pickle), whole or
    not at all (``python -m torch.cuda._memory_viz trace_plot PATH -o trace.html`` reads it)."""
    write_atomic(path, pickle.dumps(data))
