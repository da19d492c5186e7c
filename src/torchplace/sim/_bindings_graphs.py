"""CUDA graphs and memory pools on simulated GPUs: ``torch._C._CUDAGraph``, ``_MemPool``
and the allocate-to-pool bindings, emulated.

A capture (``torch.cuda.graph(g)``, ``g.capture_begin()``, ``make_graphed_callables``)
records the aten operations the capturing thread runs, as CUDA records kernels instead of
running them: their outputs are allocated in the graph's private memory pool
(``CachingAllocatorModel`` keeps it apart, as ``beginAllocateToPool`` does), capture costs
no GPU time, and tensors that existed before the capture (static inputs, parameters) get
back the values they had when it began, whatever the captured operations wrote to them.
``replay()`` runs the recorded operations again: on the current values of those tensors,
into the graph's own outputs, with fresh random numbers from the device's generator, and
each kernel is priced by the cost model again and counted. What CUDA refuses during a
capture — a host synchronisation (``.item()``, ``.cpu()``, ``torch.cuda.synchronize()``),
an operation whose output shape depends on the data — raises CUDA's error at that line
and invalidates the capture, as on a GPU (c10/cuda/CUDAGraph.cpp, CUDA Programming Guide
"Prohibited and Unhandled Operations"). Raw graph handles (``raw_cuda_graph``) and
conditional nodes are not simulated.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from torchplace.cost import runs_kernel, tensors_in
from torchplace.sim._state import SimState, storage_key

__all__ = ["graph_bindings"]

_ITEM = torch.ops.aten._local_scalar_dense.default
_SYNC_OPS = frozenset(("aten::equal", "aten::is_nonzero"))
_META = torch.device("meta")


def _capture_error(text: str) -> RuntimeError:
    err = getattr(torch, "AcceleratorError", RuntimeError)
    return err(f"CUDA error: {text}\n")


class _Slot:
    """A tensor made during the capture, in a recorded operation's arguments."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class _Recording:
    """The operations one capture recorded, replayable."""

    def __init__(self, device: int) -> None:
        self.device = device
        # (func, args, kwargs with slots, output slots, priced, meta args, meta kwargs, meta out)
        self.ops: list[tuple[Any, ...]] = []
        self.outputs: list[weakref.ref[torch.Tensor] | None] = []  # slot -> the tensor made
        self.slot_of: dict[int, int] = {}  # id(tensor) -> slot
        self.saved: dict[int, tuple[Any, Any]] = {}  # storage key -> (storage, its values)
        self.made: set[int] = set()  # storage keys of storages made during the capture

    def slot(self, t: torch.Tensor) -> int | None:
        i = self.slot_of.get(id(t))
        if i is not None:
            ref = self.outputs[i]
            if ref is not None and ref() is t:
                return i
        return None


class _Capture(TorchDispatchMode):
    """Records what one thread runs while a CUDA graph is captured (module docstring)."""

    def __init__(self, state: SimState, dispatch: Any, rec: _Recording) -> None:
        super().__init__()
        self.state = state
        self.dispatch = dispatch
        self.rec = rec
        self.thread = threading.get_ident()
        self.failed: str | None = None

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def refuse(self, kind: str) -> None:
        if threading.get_ident() != self.thread:
            return
        self.failed = kind
        raise _capture_error("operation not permitted when stream is capturing")

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if any(t is not torch.Tensor and not issubclass(t, torch.nn.Parameter) for t in types):
            return func(*args, **kwargs)
        name = func._schema.name
        if func is _ITEM or name in _SYNC_OPS or torch.Tag.dynamic_output_shape in func.tags:
            self.refuse(name)
        rec = self.rec
        if self.state.real:
            self._save_written(func, args, kwargs)
        local = self.dispatch.local
        saved, local.copying = local.copying, True  # captured kernels do not run now
        try:
            out = func(*args, **kwargs)
        finally:
            local.copying = saved
        leaves = tensors_in((args, kwargs))
        labels, _ = self.state.labels_of(leaves)
        priced = runs_kernel(func) and (bool(labels) or local.target is not None)

        def to_slot(a: Any) -> Any:
            if isinstance(a, torch.Tensor):
                i = rec.slot(a)
                return _Slot(i) if i is not None else a
            return a

        slot_args, slot_kwargs = tree_map(to_slot, (args, kwargs))
        out_slots = []
        for t in tensors_in(out):
            rec.slot_of[id(t)] = len(rec.outputs)
            out_slots.append(len(rec.outputs))
            rec.outputs.append(weakref.ref(t))
            if not func.is_view:
                rec.made.add(storage_key(t))
        meta = tree_map(_to_meta, (args, kwargs, out)) if priced else (None, None, None)
        rec.ops.append((func, slot_args, slot_kwargs, out_slots, priced, *meta))
        return out

    def _save_written(self, func: Any, args: Any, kwargs: Any) -> None:
        """Keep the values of tensors from before the capture that this operation writes."""
        schema = func._schema
        for i, arg in enumerate(schema.arguments):
            info = arg.alias_info
            if info is None or not info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            for t in tensors_in(value):
                key = storage_key(t)
                if key in self.rec.made or key in self.rec.saved:
                    continue
                storage = t.untyped_storage()
                with torch._C._DisableTorchDispatch():
                    self.rec.saved[key] = (storage, storage.clone())

    def restore(self) -> None:
        with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction():
            for storage, values in self.rec.saved.values():
                storage.copy_(values)
        self.rec.saved.clear()


def _to_meta(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=_META)
    return a


def graph_bindings(state: SimState, fmode: Any, timeline: Any) -> dict[str, Any]:
    """The emulated ``torch._C`` attributes for CUDA graphs and memory pools."""
    dispatch = fmode.dispatch
    counters = {"graph": 1, "user": 1}  # c10::cuda::MemPool uid_ and uuid_ start at 1
    lock = threading.Lock()

    def pool_handle(user: bool = False) -> tuple[int, int]:
        # MemPool::graph_pool_handle: (uid, 0) for graphs, (0, uuid) for user pools
        with lock:
            if user:
                counters["user"] += 1
                return (0, counters["user"] - 1)
            counters["graph"] += 1
            return (counters["graph"] - 1, 0)

    def allocator(device: Any) -> Any:
        return state.devices[int(device)].allocator

    def capturing(device: int, stream_id: int) -> bool:
        cap = state.capture
        return cap is not None and (cap.device, cap.stream) == (device, stream_id)

    def current_stream_capturing() -> bool:
        d = state.current
        return capturing(d, timeline.current(d))

    class _CUDAGraph:
        """torch._C._CUDAGraph (torch/csrc/cuda/Graph.cpp, aten/src/ATen/cuda/CUDAGraph.cpp)."""

        _sim_recording: _Recording | None
        _sim_capture: _Capture | None
        _sim_pool: tuple[int, int] | None
        _sim_has_graph: bool
        _sim_has_exec: bool
        _sim_debug: bool
        _sim_keep: bool
        _keep_graph: bool
        _sim_retained: list[tuple[int, int]]
        _sim_device: int
        _sim_release: Any

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            obj = object.__new__(cls)
            obj._sim_recording = None
            obj._sim_capture = None
            obj._sim_pool = None
            obj._sim_has_graph = obj._sim_has_exec = obj._sim_debug = False
            obj._sim_keep = obj._keep_graph = False
            obj._sim_retained = []
            return obj

        def __init__(self, keep_graph: bool = False) -> None:
            self._sim_keep = self._keep_graph = bool(keep_graph)  # torch 2.14 reads the latter

        def capture_begin(
            self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global"
        ) -> None:
            if self._sim_has_exec or self._sim_has_graph:
                raise RuntimeError(
                    "This CUDAGraph instance already owns a captured graph. To capture a new "
                    "graph, create a new instance."
                )
            if capture_error_mode not in ("global", "thread_local", "relaxed"):
                raise RuntimeError(
                    "Unknown capture error mode. Expected `global`, `thread_local`, or "
                    f"`relaxed`, got {capture_error_mode}"
                )
            d = state.current
            stream = timeline.current(d)
            if stream == 0:
                raise RuntimeError(
                    "CUDA graphs must be captured on a non-default stream. (However, after "
                    "capture, it's ok to replay them on the default stream.)"
                )
            if state.capture is not None:
                raise _capture_error("operation not permitted when stream is capturing")
            timeline.progress(d)
            if pool is not None:
                pool_id = (int(pool[0]), int(pool[1]))
                allocator(d).use_pool(pool_id)
            else:
                pool_id = pool_handle()
                allocator(d).use_pool(pool_id)
            state.sync()
            allocator(d).begin_allocate_to_pool(pool_id)
            self._sim_pool = pool_id
            self._sim_device = d
            rec = _Recording(d)
            capture = _Capture(state, dispatch, rec)
            capture.device, capture.stream, capture.graph = d, stream, self  # type: ignore[attr-defined]
            self._sim_recording, self._sim_capture = rec, capture
            self._sim_release = weakref.finalize(self, allocator(d).release_pool, pool_id)
            state.capture = capture
            capture.__enter__()

        def capture_end(self) -> None:
            self.capture_end_pre()
            if not self._sim_keep:
                self.instantiate()

        def capture_end_post(self) -> None:
            return None

        def capture_end_pre(self) -> None:
            capture = self._sim_capture
            if capture is None:
                raise RuntimeError("Called CUDAGraph::capture_end without a capture underway")
            d = self._sim_device
            if timeline.current(d) != capture.stream:  # type: ignore[attr-defined]
                raise RuntimeError("Capture must end on the same stream it began on.")
            capture.__exit__(None, None, None)
            state.capture = None
            state.sync()
            allocator(d).end_allocate_to_pool(self._sim_pool)
            if state.real:
                capture.restore()
            self._sim_capture = None
            if capture.failed is not None:
                self._sim_recording = None
                raise _capture_error("operation failed due to a previous error during capture")
            self._sim_has_graph = True

        def instantiate(self) -> None:
            if not self._sim_has_graph:
                raise RuntimeError(
                    "Called CUDAGraph::instantiate without a preceding successful capture."
                )
            self._sim_has_exec = True

        def replay(self) -> None:
            if not (self._sim_has_graph or self._sim_has_exec) or self._sim_recording is None:
                raise RuntimeError(
                    "Called CUDAGraph::replay without a preceding successful capture."
                )
            if not self._sim_has_exec:
                self.instantiate()
            _replay(state, dispatch, self._sim_recording)

        def reset(self) -> None:
            release = getattr(self, "_release", None)
            if release is not None:
                release()  # once: a weakref.finalize
            self._sim_recording = None
            self._sim_has_graph = self._sim_has_exec = False

        def pool(self) -> tuple[int, int]:
            if self._sim_pool is None:
                raise RuntimeError(
                    "Called CUDAGraph::pool() without a preceding successful capture."
                )
            return self._sim_pool

        def enable_debug_mode(self) -> None:
            self._sim_debug = True

        def debug_dump(self, debug_path: str) -> None:
            if not self._sim_debug:
                import warnings

                warnings.warn(
                    "CUDA Graphs debug not enabled, set with [graph].enable_debug_mode()",
                    stacklevel=2,
                )
                return
            rec = self._sim_recording
            lines = ["digraph dot {"]
            for i, op in enumerate(rec.ops if rec is not None else []):
                lines.append(f'  n{i} [label="{op[0]}"];')
                if i:
                    lines.append(f"  n{i - 1} -> n{i};")
            lines.append("}")
            with open(debug_path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")

        def register_generator_state(self, *args: Any) -> None:
            return None

        def _retain_pool(self, pool: Any) -> None:
            pool_id = (int(pool[0]), int(pool[1]))
            if pool_id not in self._sim_retained:
                self._sim_retained.append(pool_id)

        @property
        def _has_graph_exec(self) -> bool:
            return bool(self._sim_has_exec)

        def pools(self) -> list[tuple[int, int]]:
            pools = [] if self._sim_pool is None else [self._sim_pool]
            return pools + [p for p in self._sim_retained if p not in pools]

        @staticmethod
        def get_currently_capturing_graph() -> Any:
            cap = state.capture
            if cap is None:
                raise RuntimeError("No CUDA graph is currently being captured")
            return cap.graph

        def _raw(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(
                "not simulated: raw CUDA graph handles (raw_cuda_graph, raw_cuda_graph_exec) "
                "and conditional nodes: a simulated GPU has no cudaGraph_t to hand out; use "
                "capture and replay"
            )

        raw_cuda_graph = raw_cuda_graph_exec = _raw
        begin_capture_to_if_node = begin_capture_to_while_node = _raw
        end_capture_to_conditional_node = set_conditional_handle_for_current_node = _raw

    class _MemPool:
        """torch._C._MemPool (c10/cuda/MemPool.cpp): a user pool on the current device."""

        def __init__(
            self, allocator_: Any = None, is_user_created: bool = True, *rest: Any
        ) -> None:
            if allocator_ is not None:
                raise RuntimeError(
                    "not simulated: a MemPool with a pluggable allocator: its allocations "
                    "would call a shared library's functions on the GPU's memory"
                )
            self._device = state.current
            self._id = pool_handle(user=bool(is_user_created))
            allocator(self._device).use_pool(self._id)
            weakref.finalize(self, _release_pool, state, self._device, self._id)

        @property
        def id(self) -> tuple[int, int]:
            return self._id

        def use_count(self) -> int:
            return int(allocator(self._device).pool_use_count(self._id))

    for cls, name in ((_CUDAGraph, "_CUDAGraph"), (_MemPool, "_MemPool")):
        cls.__module__, cls.__name__, cls.__qualname__ = "torch._C", name, name

    def begin(device: Any, pool: tuple[int, int], *rest: Any) -> None:
        pool_id = (int(pool[0]), int(pool[1]))
        allocator(device).use_pool(pool_id)
        allocator(device).begin_allocate_to_pool(pool_id)

    def end(device: Any, pool: tuple[int, int]) -> None:
        allocator(device).end_allocate_to_pool((int(pool[0]), int(pool[1])))

    def release(device: Any, pool: tuple[int, int]) -> None:
        allocator(device).release_pool((int(pool[0]), int(pool[1])))

    class _CUDAAllocator:  # torch._C._cuda_CUDAAllocator: a type only (pluggable allocators)
        pass

    _CUDAAllocator.__module__, _CUDAAllocator.__name__ = "torch._C", "_cuda_CUDAAllocator"
    state.capturing = capturing  # type: ignore[attr-defined]
    return {
        "_CUDAGraph": _CUDAGraph,
        "_MemPool": _MemPool,
        "_cuda_CUDAAllocator": _CUDAAllocator,
        "_graph_pool_handle": pool_handle,
        "_cuda_isCurrentStreamCapturing": current_stream_capturing,
        "_cuda_beginAllocateToPool": begin,
        "_cuda_beginAllocateCurrentThreadToPool": begin,
        "_cuda_beginAllocateCurrentStreamToPool": begin,
        "_cuda_endAllocateToPool": end,
        "_cuda_endAllocateCurrentStreamToPool": end,
        "_cuda_releasePool": release,
    }


def _release_pool(state: SimState, device: int, pool: tuple[int, int]) -> None:
    if device < len(state.devices):
        state.devices[device].allocator.release_pool(pool)


def _replay(state: SimState, dispatch: Any, rec: _Recording) -> None:
    """Run a recording again (module docstring)."""
    from torchplace.sim._modes import _Op

    device = state.devices[rec.device]
    values: dict[int, Any] = {}

    def value(a: Any) -> Any:
        return values[a.index] if isinstance(a, _Slot) else a

    on_op: Callable[..., None] | None = dispatch.on_op
    for func, args, kwargs, out_slots, priced, margs, mkwargs, mout in rec.ops:
        if state.real:
            with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction():
                out = dispatch._run(func, _Op.of(func), *tree_map(value, (args, kwargs)), device)
            for slot, t in zip(out_slots, tensors_in(out), strict=False):
                values[slot] = t
        if priced and on_op is not None:
            on_op(
                func,
                margs,
                mkwargs,
                mout,
                rec.device,
                tensors_in((margs, mkwargs)),
                tensors_in(mout),
            )
    if not state.real:
        return
    with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction(), torch.no_grad():
        for slot, ref in enumerate(rec.outputs):
            made = ref() if ref is not None else None
            fresh = values.get(slot)
            if made is not None and fresh is not None and made.shape == fresh.shape:
                made.copy_(fresh)
