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
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from torchplace.cost import runs_kernel, tensors_in
from torchplace.sim.accounting._state import SimState, storage_key
from torchplace.sim.emulation._modes import _Op

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


class _Place:
    """Where a tensor of a private memory pool lives: its block's address, and its view.

    A graph reads and writes its tensors at their device addresses. When graphs share a
    pool, a tensor one graph made may die after its capture and its memory go to a tensor
    a later capture makes; a replay then reads, and writes, whatever lives at the address,
    as on a GPU (the corruption torch.cuda.graph's pool-sharing docs warn of). So such a
    tensor is held weakly, by address.
    """

    __slots__ = ("address", "device", "dtype", "nbytes", "offset", "ref", "shape", "stride")

    def __init__(self, t: torch.Tensor, address: int, device: int) -> None:
        self.ref = weakref.ref(t)
        self.address, self.device = address, device
        self.dtype, self.shape, self.stride = t.dtype, t.shape, t.stride()
        self.offset = t.storage_offset()
        extent = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride, strict=True))
        self.nbytes = (self.offset + extent) * self.dtype.itemsize if t.numel() else 0

    def made(self, state: SimState) -> torch.Tensor | None:
        """The tensor made, if it lives (at this address) still."""
        t = self.ref()
        if t is not None and state.address(t.untyped_storage()) == self.address:
            return t
        return None

    def view(self, storage: Any) -> torch.Tensor:
        with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction():
            out = torch.empty(0, dtype=self.dtype)
            return out.set_(storage, self.offset, self.shape, self.stride)


class _PoolMemory:
    """What the addresses of private pools hold, for :class:`_Place`: the storage living at
    an address, else the bytes last written there (a freed block keeps its contents)."""

    def __init__(self, state: SimState) -> None:
        self.state = state
        self.kept: dict[tuple[int, int], Any] = {}  # (device, address) -> bytes written
        self.read_by_graphs: set[tuple[int, int]] = set()  # addresses graphs read as input
        self._occupants: dict[tuple[int, int], Any] | None = None  # per replay

    def begin(self) -> None:
        self._occupants = None

    def _storage(self, place: _Place) -> Any:
        if self._occupants is None:
            state = self.state
            refs = state._refs
            self._occupants = {
                (rec.device, rec.handle): refs[key]
                for key, rec in list(state.storages.items())
                if key in refs
            }
        ref = self._occupants.get((place.device, place.address))
        storage = ref() if ref is not None else None
        if storage is not None and storage.nbytes() >= place.nbytes:
            return storage
        return None

    def read(self, place: _Place) -> torch.Tensor:
        t = place.made(self.state)
        if t is not None:
            return t
        storage = self._storage(place)
        if storage is None:
            storage = self.kept.get((place.device, place.address))
        if storage is None or storage.nbytes() < place.nbytes:  # never written: any bytes
            return torch.empty_strided(place.shape, place.stride, dtype=place.dtype)
        return place.view(storage)

    def target(self, place: _Place) -> torch.Tensor:
        """Where a replay writes what ``place``'s operation computed."""
        t = place.made(self.state)
        if t is not None:
            return t
        storage = self._storage(place)
        key = (place.device, place.address)
        if storage is not None:
            self.kept.pop(key, None)
            return place.view(storage)
        kept = self.kept.get(key)
        if kept is None or kept.nbytes() < place.nbytes:
            with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction():
                grown = torch.zeros(place.nbytes, dtype=torch.uint8).untyped_storage()
                if kept is not None:
                    grown[: kept.nbytes()].copy_(kept)
            self.kept[key] = kept = grown
        return place.view(kept)


class _Marker:
    """A recorded graph node that runs no kernel (see _Capture.add_marker)."""

    __slots__ = ("replay",)

    def __init__(self, replay: Callable[[], None]) -> None:
        self.replay = replay


class _Recording:
    """The operations one capture recorded, replayable."""

    def __init__(self, device: int, pool: tuple[int, int]) -> None:
        self.device, self.pool = device, pool
        # (func, args, kwargs with slots, output slots, priced, meta args, meta kwargs, meta out)
        self.ops: list[tuple[Any, ...]] = []
        # slot -> the tensor made: weakly, or by its place in a private pool
        self.outputs: list[weakref.ref[torch.Tensor] | _Place] = []
        self.slot_of: dict[int, int] = {}  # id(tensor) -> slot
        self.saved: dict[int, tuple[Any, Any]] = {}  # storage key -> (its bytes, their values)
        self.made: set[int] = set()  # storage keys of storages made during the capture

    def slot(self, t: torch.Tensor) -> int | None:
        i = self.slot_of.get(id(t))
        if i is not None:
            ref = self.outputs[i]
            if (ref.ref if isinstance(ref, _Place) else ref)() is t:
                return i
        return None


class _Capture(TorchDispatchMode):
    """Records what one thread runs while a CUDA graph is captured (module docstring)."""

    def __init__(
        self, state: SimState, dispatch: Any, rec: _Recording, memory: _PoolMemory
    ) -> None:
        self.memory = memory
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
        leaves = tensors_in((args, kwargs))
        labels, _ = self.state.labels_of(leaves)
        local = self.dispatch.local
        if not labels and local.target is None:
            return func(*args, **kwargs)  # host work: it runs now, and is no kernel
        name = func._schema.name
        if func is _ITEM or name in _SYNC_OPS or torch.Tag.dynamic_output_shape in func.tags:
            if not labels:  # a host tensor's value, read by a kernel's host code (a CPU lr's)
                return func(*args, **kwargs)
            self.refuse(name)
        rec = self.rec
        if self.state.real:
            self._save_written(func, args, kwargs)
        saved, local.copying = local.copying, True  # captured kernels do not run now
        try:
            out = func(*args, **kwargs)
        finally:
            local.copying = saved
        priced = runs_kernel(func)

        def to_slot(a: Any) -> Any:
            if isinstance(a, torch.Tensor):
                i = rec.slot(a)
                if i is not None:
                    return _Slot(i)
                if storage_key(a) in rec.made:
                    return a
                place = self._place(a)
                if place is None:
                    return a
                self.memory.read_by_graphs.add((place.device, place.address))
                return place
            return a

        slot_args, slot_kwargs = tree_map(to_slot, (args, kwargs))
        out_slots = []
        for t in tensors_in(out):
            rec.slot_of[id(t)] = len(rec.outputs)
            out_slots.append(len(rec.outputs))
            if not func.is_view:
                rec.made.add(storage_key(t))
            rec.outputs.append(self._place(t) or weakref.ref(t))
        meta = tree_map(_to_meta, (args, kwargs, out)) if priced else (None, None, None)
        rec.ops.append((func, slot_args, slot_kwargs, out_slots, priced, *meta))
        return out

    def add_marker(self, replay: Callable[[], None]) -> None:
        """A graph node that is no kernel (an event record): ``replay`` runs at its place
        in every replay."""
        self.rec.ops.append((_Marker(replay), (), {}, [], False, None, None, None))

    def _place(self, t: torch.Tensor) -> _Place | None:
        """Where ``t`` lives if a private memory pool holds it (:class:`_Place`)."""
        state = self.state
        address = state.address(t.untyped_storage())
        if address is None:
            return None
        device = state.label(t)
        if device is None or state.devices[device].allocator.pool_of(address) is None:
            return None
        return _Place(t, address, device)

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
                with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction():
                    data = torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage())
                    self.rec.saved[key] = (data, data.clone())

    def restore(self) -> None:
        with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction():
            for data, values in self.rec.saved.values():
                data.copy_(values)
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

    # The default generator's seed and offset holders: two one-element int64 tensors the
    # generator allocates when the first graph registers with it (at capture_begin) and
    # frees when the last one is destroyed (CUDAGeneratorState::register_graph and
    # unregister_graph, aten/src/ATen/cuda/CUDAGeneratorImpl.cpp).
    registered: dict[int, tuple[set[int], list[int]]] = {}

    def register(device: int, graph: int) -> None:
        graphs, holders = registered.setdefault(device, (set(), []))
        if not graphs:
            dev = state.devices[device]
            with state._lock:
                holders[:] = [state._malloc(dev, 8), state._malloc(dev, 8)]
        graphs.add(graph)

    def forget(device: int, graph: int, pool: tuple[int, int] | None) -> None:
        if device >= len(state.devices):
            return  # the simulation ended
        if pool is not None:
            allocator(device).release_pool(pool)
            host_release = getattr(state.pinned, "release_pool", None)  # while simulated
            if host_release is not None and allocator(device).pool_use_count(pool) == 0:
                host_release(pool)
        graphs, holders = registered.get(device, (set(), []))
        if graph in graphs:
            graphs.discard(graph)
            if not graphs:
                for address in holders:
                    allocator(device).free(address)
                holders.clear()

    def capturing(device: int, stream_id: int) -> bool:
        cap = state.capture
        return cap is not None and (cap.device, cap.stream) == (device, stream_id)

    def current_stream_capturing() -> bool:
        d = state.current
        return capturing(d, timeline.current(d))

    memory = _PoolMemory(state)
    debug = {"on": False}  # CUDAGraph.cpp's _cuda_graphs_debug: one flag for every graph

    class _CUDAGraph:
        """torch._C._CUDAGraph (torch/csrc/cuda/Graph.cpp, aten/src/ATen/cuda/CUDAGraph.cpp).

        The flags follow CUDAGraph.cpp: ``capture_ended_`` once a capture ended,
        ``has_graph_`` while the captured graph is kept (``keep_graph=True``),
        ``has_graph_exec_`` once instantiated; the checks and their messages are its own.
        """

        _sim_recording: _Recording | None
        _sim_capture: _Capture | None
        _sim_pool: tuple[int, int] | None
        _sim_ended: bool
        _sim_has_graph: bool
        _sim_has_exec: bool
        _keep_graph: bool
        _sim_retained: list[tuple[int, int]]
        _sim_device: int
        _sim_release: Any

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            obj = object.__new__(cls)
            obj._sim_recording = None
            obj._sim_capture = None
            obj._sim_pool = None
            obj._sim_ended = obj._sim_has_graph = obj._sim_has_exec = False
            obj._keep_graph = False
            obj._sim_retained = []
            obj._sim_release = None
            return obj

        def __init__(self, keep_graph: bool = False) -> None:
            self._keep_graph = bool(keep_graph)  # torch 2.14's Python reads it

        def capture_begin(
            self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global"
        ) -> None:
            if self._sim_has_exec:
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
            if pool is not None and (pool[0] or pool[1]):
                pool_id = (int(pool[0]), int(pool[1]))
            else:
                pool_id = pool_handle(user=False)
            allocator(d).use_pool(pool_id)
            state.sync()
            register(d, id(self))
            allocator(d).begin_allocate_to_pool(pool_id)
            state.pinned.begin_allocate_to_pool(pool_id)  # the host allocator's too
            self._sim_pool = pool_id
            self._sim_device = d
            self._sim_release = weakref.finalize(self, forget, d, id(self), None)
            rec = _Recording(d, pool_id)
            capture = _Capture(state, dispatch, rec, memory)
            capture.device, capture.stream, capture.graph = d, stream, self  # type: ignore[attr-defined]
            capture.generators = _generator_states(d)  # type: ignore[attr-defined]
            self._sim_recording, self._sim_capture = rec, capture
            state.capture = capture
            capture.__enter__()

        def capture_end(self) -> None:
            # torch 2.13's binding; 2.14's Python calls the three steps itself
            self.capture_end_pre()
            if not self._keep_graph:
                self.instantiate()
            self.capture_end_post()

        def capture_end_post(self) -> None:
            if not self._keep_graph:  # the graph was instantiated; only its exec is kept
                self._sim_has_graph = False

        def capture_end_pre(self) -> None:
            capture = self._sim_capture
            d = getattr(self, "_sim_device", state.current)
            if capture is None:
                if timeline.current(d) == 0 or state.capture is None:
                    raise _capture_error("operation not permitted when stream is capturing")
                raise RuntimeError("Capture must end on the same stream it began on.")
            if timeline.current(d) != capture.stream:  # type: ignore[attr-defined]
                raise RuntimeError("Capture must end on the same stream it began on.")
            capture.__exit__(None, None, None)
            state.capture = None
            self._sim_capture = None
            state.sync()
            allocator(d).end_allocate_to_pool(self._sim_pool)
            state.pinned.end_allocate_to_pool(self._sim_pool)
            if state.real:
                capture.restore()
            _restore_generators(capture.generators)  # type: ignore[attr-defined]
            self._sim_release.detach()
            self._sim_release = weakref.finalize(self, forget, d, id(self), self._sim_pool)
            if capture.failed is not None:
                self._sim_recording = None
                raise _capture_error("operation failed due to a previous error during capture")
            rec = self._sim_recording
            if rec is not None and not rec.ops:
                warnings.warn(
                    "The CUDA Graph is empty. This usually means that the graph was attempted "
                    "to be captured on wrong device or stream.",
                    stacklevel=3,
                )
            self._sim_ended = self._sim_has_graph = True

        def instantiate(self) -> None:
            if not self._sim_ended:
                raise RuntimeError("capture_end() must have been called before calling instantiate")
            if self._sim_has_exec and not self._keep_graph:
                raise RuntimeError(
                    "instantiate() is intended to be called by the user only when keep_graph=true"
                )
            self._sim_has_exec = True

        def replay(self) -> None:
            if not self._sim_ended or self._sim_recording is None:
                raise RuntimeError(
                    "Called CUDAGraph::replay without a preceding successful capture."
                )
            if not self._sim_has_exec:
                self.instantiate()
            _replay(state, dispatch, self._sim_recording, memory)

        def reset(self) -> None:
            if self._sim_capture is not None:  # reset mid-capture: the capture is abandoned
                self._sim_capture.__exit__(None, None, None)
                state.capture = None
                allocator(self._sim_device).end_allocate_to_pool(self._sim_pool)
                state.pinned.end_allocate_to_pool(self._sim_pool)
                self._sim_release.detach()
                self._sim_release = weakref.finalize(
                    self, forget, self._sim_device, id(self), self._sim_pool
                )
                self._sim_capture = None
            if self._sim_release is not None:
                self._sim_release()  # once: a weakref.finalize
            self._sim_recording = None
            self._sim_ended = self._sim_has_graph = self._sim_has_exec = False

        def pool(self) -> tuple[int, int]:
            if not self._sim_ended or self._sim_pool is None:
                raise RuntimeError(
                    "Called CUDAGraph::pool() without a preceding successful capture."
                )
            return self._sim_pool

        def enable_debug_mode(self) -> None:
            debug["on"] = True

        def debug_dump(self, debug_path: str) -> None:
            if not (debug["on"] or self._keep_graph):
                warnings.warn(
                    "CUDA Graphs debug not enabled, set with [graph].enable_debug_mode()",
                    stacklevel=3,
                )
                return
            warnings.warn("DEBUG: calling debug_dump()", stacklevel=3)
            rec = self._sim_recording
            if rec is None or not self._sim_ended:
                return
            warnings.warn(
                f"DEBUG: calling cudaGraphDebugDotPrint() with {debug_path}", stacklevel=3
            )
            lines = ["digraph dot {"]
            for i, op in enumerate(rec.ops):
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
            if cap is None or not current_stream_capturing():
                raise RuntimeError("The current stream is not currently capturing.")
            return cap.graph

        def raw_cuda_graph(self) -> Any:
            if not self._keep_graph:
                raise RuntimeError(
                    "You cannot access the raw cudaGraph_t instance unless CUDAGraph was "
                    "initialized with keep_graph=true"
                )
            if not self._sim_has_graph:
                raise RuntimeError(
                    "You cannot access the raw cudaGraph_t instance until capture_end() has "
                    "been called"
                )
            _refuse_raw()

        def raw_cuda_graph_exec(self) -> Any:
            if not self._sim_has_exec:
                raise RuntimeError(
                    "You cannot access the raw cudaGraphExec_t instance until instantiate() "
                    "has been called"
                )
            _refuse_raw()

        def _conditional(self, *args: Any, **kwargs: Any) -> Any:
            _refuse_raw()

        begin_capture_to_if_node = begin_capture_to_while_node = _conditional
        end_capture_to_conditional_node = set_conditional_handle_for_current_node = _conditional

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
            # c10/cuda/MemPool.cpp MemPool::MemPool(allocator, is_user_created, use_on_oom,
            # no_split): a no_split pool never splits a block (setNoSplit)
            if len(rest) > 1 and rest[1]:
                allocator(self._device).set_no_split(self._id)
            weakref.finalize(self, _release_pool, state, self._device, self._id)

        @property
        def id(self) -> tuple[int, int]:
            return self._id

        @property
        def allocator(self) -> None:
            return None  # no pluggable allocator: refused above

        @property
        def device(self) -> int:
            return self._device

        def use_count(self) -> int:
            return int(allocator(self._device).pool_use_count(self._id))

    class _AcceleratorGraph(_CUDAGraph):
        """torch._C._acceleratorGraph, torch.accelerator.Graph's base: the current
        accelerator's graph, a CUDA graph here; its capture mode "default" is "global"."""

        def capture_begin(
            self, pool: tuple[int, int] | None = None, capture_error_mode: str = "default"
        ) -> None:
            mode = "global" if capture_error_mode == "default" else capture_error_mode
            super().capture_begin(pool, mode)

    for cls, name in (
        (_CUDAGraph, "_CUDAGraph"),
        (_MemPool, "_MemPool"),
        (_AcceleratorGraph, "_acceleratorGraph"),
    ):
        cls.__module__, cls.__name__, cls.__qualname__ = "torch._C", name, name

    def begin(device: Any, pool: tuple[int, int], *rest: Any, thread: int | None = None) -> None:
        pool_id = (int(pool[0]), int(pool[1]))
        allocator(device).use_pool(pool_id)
        allocator(device).begin_allocate_to_pool(pool_id, thread=thread)

    def begin_this_thread(device: Any, pool: tuple[int, int]) -> None:
        # torch/csrc/cuda/Module.cpp _cuda_beginAllocateCurrentThreadToPool: the pool serves
        # only the calling thread (its filter compares std::this_thread::get_id())
        begin(device, pool, thread=threading.get_ident())

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
        "_acceleratorGraph": _AcceleratorGraph,
        "_MemPool": _MemPool,
        "_cuda_CUDAAllocator": _CUDAAllocator,
        "_graph_pool_handle": lambda: pool_handle(user=True),
        "_cuda_isCurrentStreamCapturing": current_stream_capturing,
        "_cuda_beginAllocateToPool": begin,
        "_cuda_beginAllocateCurrentThreadToPool": begin_this_thread,
        "_cuda_beginAllocateCurrentStreamToPool": begin,
        "_cuda_endAllocateToPool": end,
        "_cuda_endAllocateCurrentStreamToPool": end,
        "_cuda_releasePool": release,
    }


def _refuse_raw() -> None:
    raise RuntimeError(
        "not simulated: raw CUDA graph handles (raw_cuda_graph, raw_cuda_graph_exec) and "
        "conditional nodes: a simulated GPU has no cudaGraph_t to hand out; use capture and "
        "replay"
    )


def _generator_states(device: int) -> list[tuple[Any, Any]]:
    """The device's generators and their states when a capture begins."""
    generators: Any = torch.cuda.default_generators
    gens = [generators[device]] if device < len(generators) else []
    for g in gens:
        g._capture_seed = g.initial_seed()
    return [(g, g.get_state()) for g in gens]


def _restore_generators(saved: list[tuple[Any, Any]]) -> None:
    """Captured random operations draw their numbers at replay, not at capture."""
    for g, st in saved:
        g.set_state(st)
        g._capture_seed = None


def _release_pool(state: SimState, device: int, pool: tuple[int, int]) -> None:
    if device < len(state.devices):
        state.devices[device].allocator.release_pool(pool)


def _replay(state: SimState, dispatch: Any, rec: _Recording, memory: _PoolMemory) -> None:
    """Run a recording again (module docstring): below autograd, as the kernels run."""
    with torch.no_grad():
        _replay_ops(state, dispatch, rec, memory)


def _replay_ops(state: SimState, dispatch: Any, rec: _Recording, memory: _PoolMemory) -> None:
    device = state.devices[rec.device]
    values: dict[int, Any] = {}

    memory.begin()

    def value(a: Any) -> Any:
        if isinstance(a, _Slot):
            return values[a.index]
        return memory.read(a) if isinstance(a, _Place) else a

    on_op: Callable[..., None] | None = dispatch.on_op
    for func, args, kwargs, out_slots, priced, margs, mkwargs, mout in rec.ops:
        if type(func) is _Marker:
            func.replay()
            continue
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
    # a dead tensor's bytes matter only where another graph may read them: a shared pool,
    # or an address another graph reads
    shared = device.allocator.pool_use_count(rec.pool) > 1
    watched = memory.read_by_graphs
    with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction():
        for slot, ref in enumerate(rec.outputs):
            made: torch.Tensor | None
            if isinstance(ref, _Place):
                if shared or (ref.device, ref.address) in watched:
                    made = memory.target(ref)
                else:
                    made = ref.made(state)
            else:
                made = ref()
            fresh = values.get(slot)
            if made is not None and fresh is not None and made.shape == fresh.shape:
                made.copy_(fresh)
