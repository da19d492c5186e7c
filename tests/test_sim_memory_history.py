"""Python stacks in ``torch.cuda.memory._record_memory_history`` snapshots, as torch has them.

Which trace entry carries which traceback is c10/cuda/CUDACachingAllocator.cpp's: a block
keeps the context gathered when it was allocated (``context`` "state" or more); ``record_trace``
attaches a context to an entry only when ``context`` is "alloc" or "all"; a free's own context
is gathered only with "all" (``free``: ``context ? context : block->context_when_allocated``),
and a segment_free falls back to ``context_when_segment_allocated`` the same way.
torch/csrc/cuda/memory_snapshot.cpp gives every segment, block and entry a ``frames`` list.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from torchplace.sim import simulate

MiB = 1024**2


def _allocate(device: str = "cuda", floats: int = MiB) -> torch.Tensor:
    return torch.empty(floats, device=device)


def _release(tensors: list[torch.Tensor]) -> None:
    tensors.pop()


def _names(frames: list[dict[str, Any]]) -> list[str]:
    return [f["name"] for f in frames]


def _entries(snap: dict[str, Any], device: int = 0) -> dict[str, list[str]]:
    """The innermost frame names of each action's last entry."""
    return {e["action"]: _names(e["frames"]) for e in snap["device_traces"][device]}


def _run(context: str | None, floats: int = 5 * MiB) -> dict[str, Any]:
    """Allocate and free, by default a whole 20 MiB segment (never split)."""
    torch.cuda.memory.empty_cache()
    torch.cuda.memory._record_memory_history(context=context, stacks="python")
    try:
        tensors = [_allocate(floats=floats)]
        _release(tensors)
        torch.cuda.memory.empty_cache()
        return torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(None)


def test_context_all_gives_the_free_its_own_stack() -> None:
    with simulate("H100"):
        entries = _entries(_run("all"))
    # whole Python stacks, innermost first, none of the simulator's frames
    assert entries["alloc"][:3] == [
        "_allocate",
        "_run",
        "test_context_all_gives_the_free_its_own_stack",
    ]
    assert entries["segment_alloc"][:2] == ["_allocate", "_run"]
    assert entries["free_requested"][:2] == entries["free_completed"][:2] == ["_release", "_run"]
    # torch's test_memory_plots_free_stack: "empty_cache" is in the snapshot only with "all"
    assert entries["segment_free"][:2] == ["empty_cache", "_run"]


@pytest.mark.parametrize("context", ["alloc", "state", None])
def test_other_contexts_fall_back_or_record_nothing(context: str | None) -> None:
    with simulate("H100"):
        snap = _run(context)
    entries = _entries(snap)
    assert "empty_cache" not in json.dumps(snap)
    if context == "alloc":  # frees and the segment's free carry the allocation's stack
        for action in (
            "alloc",
            "free_requested",
            "free_completed",
            "segment_alloc",
            "segment_free",
        ):
            assert entries[action][:2] == ["_allocate", "_run"], action
    else:  # "state": only live blocks carry frames; None: nothing
        assert all(frames == [] for frames in entries.values())


def test_a_split_segment_loses_its_context() -> None:
    # 4 MiB from a 20 MiB segment: the split makes a new head block without the segment's
    # context (torch's test_memory_plots_free_stack: no "thealloc" in the snapshot with
    # "state"), so its segment_free has none with "alloc" either
    with simulate("H100"):
        entries = _entries(_run("alloc", floats=MiB))
        assert entries["segment_alloc"][:2] == ["_allocate", "_run"]
        assert entries["segment_free"] == []
        torch.cuda.memory._record_memory_history("state", stacks="python")
        whole, part = _allocate(floats=5 * MiB), _allocate()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(None)
        frames = {s["address"]: _names(s["frames"])[:1] for s in snap["segments"]}
        assert frames[whole.untyped_storage().data_ptr()] == ["_allocate"]
        assert frames[part.untyped_storage().data_ptr()] == []


def test_state_keeps_live_blocks_frames_on_a_second_device() -> None:
    with simulate("H100", gpus=2):
        torch.cuda.memory._record_memory_history("state", stacks="python")
        kept = _allocate("cuda:1")
        gone = [_allocate("cuda:1")]
        _release(gone)
        snap = torch.cuda.memory._snapshot()
        ptr = kept.untyped_storage().data_ptr()
        traceback = torch.cuda.memory._allocation_traceback(ptr)
        assert traceback is not None and _names(traceback)[0] == "_allocate"
        assert torch.cuda.memory._allocation_traceback(ptr + 512) is None  # not a block's base
        torch.cuda.memory._record_memory_history(None)
    assert snap["device_traces"] == [[], []]  # enabled="state" keeps no events
    blocks = {b["address"]: b for s in snap["segments"] if s["device"] == 1 for b in s["blocks"]}
    live = blocks[ptr]
    assert live["state"] == "active_allocated"
    assert _names(live["frames"])[:2] == [
        "_allocate",
        "test_state_keeps_live_blocks_frames_on_a_second_device",
    ]
    assert all(b["frames"] == [] for b in blocks.values() if b["state"] == "inactive")
    assert all("frames" in s for s in snap["segments"])


def test_allocation_traceback_needs_a_context() -> None:
    with simulate("H100"):
        torch.cuda.memory._record_memory_history(context=None)
        x = _allocate()
        assert torch.cuda.memory._allocation_traceback(x.untyped_storage().data_ptr()) is None
        torch.cuda.memory._record_memory_history(None)


def test_cpp_stacks_with_stacks_all() -> None:
    # stacks="all" adds C++ frames (torch's test_memory_plots: "::rand" in the snapshot)
    with simulate("H100"):
        torch.cuda.memory._record_memory_history(context="all", stacks="all")
        x = torch.rand(128, 128, device="cuda")
        text = json.dumps(torch.cuda.memory._snapshot())
        torch.cuda.memory._record_memory_history(None)
    assert "::rand" in text and "test_cpp_stacks_with_stacks_all" in text
    assert "torchplace" not in text.replace("test_sim_memory_history", "")
    del x


def test_memory_metadata_is_attached_to_later_entries() -> None:
    with simulate("H100"):
        torch.cuda.memory._record_memory_history(context="alloc")
        a = _allocate()
        torch.cuda.memory._set_memory_metadata("phase 2")
        assert torch.cuda.memory._get_memory_metadata() == "phase 2"
        b = _allocate()
        torch.cuda.memory._set_memory_metadata("")
        del a
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(None)
        del b
    metadata = [(e["action"], e["user_metadata"]) for e in snap["device_traces"][0]]
    assert metadata[-2:] == [("free_requested", ""), ("free_completed", "")]
    assert ("alloc", "phase 2") in metadata and metadata[0] == ("segment_alloc", "")


def test_no_stacks_are_gathered_while_history_is_off() -> None:
    # the hot path: without a history, allocations and frees keep one user frame only
    with simulate("H100") as report:
        torch.cuda.memory._record_memory_history(context="all")
        torch.cuda.memory._record_memory_history(None)
        xs = [_allocate() for _ in range(3)]
        del xs
        torch.cuda.synchronize()
    state = report.state
    assert state is not None and state.stacks is None and len(state.trace) >= 3
    assert not (state.trace.stacks or state.trace.free_stacks or state.trace.tracebacks)
