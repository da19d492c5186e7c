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

import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchplace._output import write_atomic

if TYPE_CHECKING:
    from torchplace.sim._state import SimState

__all__ = ["dump", "snapshot"]


def _frames(state: SimState, index: int) -> list[dict[str, Any]]:
    if index < 0:
        return []
    entry = state.trace.frames[index]
    return [{"filename": entry[0], "line": entry[1], "name": entry[2] if len(entry) > 2 else ""}]


def _in(ranges: list[tuple[int, int | None]] | None, seq: int) -> bool:
    if ranges is None:
        return True
    return any(start <= seq and (end is None or seq <= end) for start, end in ranges)


def snapshot(
    state: SimState, *, history: list[tuple[int, int | None]] | None = None
) -> dict[str, Any]:
    """The snapshot dict of a simulation (see the module docstring).

    Args:
        state: the simulation's state.
        history: sequence ranges whose events go in ``device_traces`` (None: all).
    """
    state.sync()
    trace = state.trace
    live = {(rec.device, rec.handle): rec.trace_index for rec in state.storages.values()}
    segments = []
    for dev in state.devices:
        for seg in dev.allocator.snapshot():
            for block in seg["blocks"]:
                index = live.get((dev.index, block["address"]))
                if index is not None and index >= 0:
                    block["frames"] = _frames(state, trace.frame[index])
            segments.append(seg)
    events: list[tuple[int, dict[str, Any]]] = []
    for i in range(len(trace)):
        device, size, address = trace.device[i], trace.size[i], trace.address[i]
        frames = _frames(state, trace.frame[i])
        start, end = trace.start[i], trace.end[i]
        if _in(history, start):
            events.append(
                (start, _event(device, "alloc", address, size, trace.start_time[i], frames))
            )
        if end >= 0 and _in(history, end):
            for action in ("free_requested", "free_completed"):
                events.append(
                    (end, _event(device, action, address, size, trace.end_time[i], frames))
                )
    for seq, device, kind, address, size, time in trace.segments:
        if _in(history, seq):
            events.append((seq, _event(device, kind, address, size, time, [])))
    for seq, device, size, frame in trace.ooms:
        if _in(history, seq):
            oom = _event(device, "oom", 0, size, 0.0, _frames(state, frame))
            oom["device_free"] = state.devices[device].allocator.device_free_bytes
            events.append((seq, oom))
    events.sort(key=lambda e: e[0])
    traces: list[list[dict[str, Any]]] = [[] for _ in state.devices]
    for _, event in events:
        if event["device"] < len(traces):
            traces[event.pop("device")].append(event)
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
