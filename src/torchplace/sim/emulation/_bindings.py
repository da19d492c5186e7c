"""torch's CUDA bindings, emulated for simulated GPUs: the lowest seam.

``torch.cuda``'s Python code calls into ``torch._C``: ``_cuda_getDeviceCount``,
``_cuda_init``, ``_cuda_memoryStats``, ``_CudaDeviceProperties``, ``_CudaStreamBase``,
``_CUDAGraph``, ``_cudart``, ... For the length of a simulation those bindings answer as the
simulated GPUs would (device count and properties, memory statistics and snapshots from the
caching-allocator model, streams and events on the simulated timeline, CUDA graphs that
replay their captured work), and torch's own Python runs unchanged on top of them: its
lazy initialisation (``torch.cuda.is_initialized()`` turns True when CUDA is first used, as
on a GPU), its argument checks, its errors and warnings. Classes that torch's modules
derive from these bindings at import are re-created from torch's own source
(:mod:`torchplace.sim.emulation._bindings_reload`). Everything is put back when the simulation ends.

Each binding follows the C++ it stands for (``torch/csrc/cuda/Module.cpp`` unless said
otherwise). What a simulated GPU cannot do (pluggable allocators loaded from a shared
library, CUDA IPC, kernels compiled at run time) raises ``RuntimeError("not simulated:
...")`` at the call, saying why.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

from torchplace.sim.accounting._state import SimState, is_user_file, sim_uuid
from torchplace.sim.allocator import AllocatorOOM, PoolCheckpoint
from torchplace.sim.emulation._bindings_graphs import graph_bindings
from torchplace.sim.emulation._bindings_host import PinnedHostMemory
from torchplace.sim.emulation._bindings_reload import reloaded
from torchplace.sim.emulation._bindings_settings import settings_bindings
from torchplace.sim.emulation._bindings_streams import (
    CUDA_TYPE,
    Timeline,
    device_clock_khz,
    invalid_ordinal,
    stream_classes,
)
from torchplace.sim.snapshot import MemoryHistory

__all__ = ["ARCH_FLAGS", "CUDA_RUNTIME", "CUDNN_VERSION", "installed", "not_simulated"]

#: sm_ architectures of the CUDA 13.0 wheels of torch 2.14.1 (``torch.cuda.get_arch_list()``)
ARCH_FLAGS = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
#: ``cudaRuntimeGetVersion`` of those wheels (``torch._C._cuda_getCompiledVersion()``)
CUDA_RUNTIME = 13000
#: cuDNN's version in those wheels (cudnn_version.h of the nvidia-cudnn package they install;
#: ``torch.backends.cudnn.version()``)
CUDNN_VERSION = 92400
# Modules whose classes derive from the bindings at import (see _bindings_reload).
_RELOADED = (
    "torch.cuda.streams",
    "torch.cuda.memory",
    "torch.cuda.graphs",
    "torch.accelerator.graphs",
)
_CUDA_INIT = sys.modules["torch.cuda"].__file__


def not_simulated(what: str, why: str) -> RuntimeError:
    """The error for CUDA functionality a simulated GPU does not provide."""
    return RuntimeError(f"not simulated: {what}: {why}")


# --------------------------------------------------------------------- device properties


class _CUuuid:
    """``torch._C._CUuuid``: a device UUID (``bytes``: 16 ints; ``str()``: 8-4-4-4-12 hex)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes) -> None:
        self._raw = raw

    @property
    def bytes(self) -> list[int]:
        return list(self._raw)

    def __str__(self) -> str:
        h = self._raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_CUuuid.__module__ = "torch._C"

#: the fields of torch 2.14.1's _CudaDeviceProperties (its pybind class), in order
_FIELDS = (
    "name", "major", "minor", "is_multi_gpu_board", "is_integrated", "multi_processor_count",
    "total_memory", "max_threads_per_multi_processor", "max_threads_per_block", "warp_size",
    "shared_memory_per_block", "clock_rate", "memory_clock_rate", "memory_bus_width",
    "shared_memory_per_multiprocessor", "shared_memory_per_block_optin",
    "regs_per_multiprocessor", "gcnArchName", "uuid", "pci_bus_id", "pci_device_id",
    "pci_domain_id", "L2_cache_size",
)  # fmt: skip


class _CudaDeviceProperties:
    """``torch._C._CudaDeviceProperties``: read-only fields, torch's repr; one object per
    device (pybind returns the same wrapper for the same ``cudaDeviceProp``), so the
    properties of one device compare equal."""

    __slots__ = ("_values",)
    _values: dict[str, Any]

    def __init__(self) -> None:
        raise TypeError("torch._C._CudaDeviceProperties: No constructor defined!")

    @classmethod
    def _make(cls, values: dict[str, Any]) -> _CudaDeviceProperties:
        obj = object.__new__(cls)
        object.__setattr__(obj, "_values", values)
        return obj

    def __repr__(self) -> str:
        v = self._values
        return (
            f"_CudaDeviceProperties(name='{v['name']}', major={v['major']}, "
            f"minor={v['minor']}, total_memory={v['total_memory'] // 1024**2}MB, "
            f"multi_processor_count={v['multi_processor_count']}, uuid={v['uuid']}, "
            f"pci_bus_id={v['pci_bus_id']}, pci_device_id={v['pci_device_id']}, "
            f"pci_domain_id={v['pci_domain_id']}, "
            f"L2_cache_size={v['L2_cache_size'] // 1024**2}MB)"
        )


for _name in _FIELDS:
    setattr(
        _CudaDeviceProperties,
        _name,
        property(lambda self, _n=_name: self._values[_n]),  # type: ignore[misc]
    )
_CudaDeviceProperties.__module__ = "torch._C"


def _properties(state: SimState, index: int) -> _CudaDeviceProperties:
    d = state.devices[index]
    spec = d.spec
    major, minor = spec.compute_capability or (9, 4)
    values: dict[str, Any] = {
        "name": spec.torch_name,
        "major": major,
        "minor": minor,
        "is_multi_gpu_board": 0,
        "is_integrated": 0,
        "multi_processor_count": spec.multiprocessor_count,
        "total_memory": d.capacity,
        **spec.arch_properties(),
        "clock_rate": device_clock_khz(state, index),
        "memory_clock_rate": spec.memory_clock_khz or 0,
        "memory_bus_width": spec.memory_bus_width_bits or 0,
        "gcnArchName": spec.gcn_arch or spec.torch_name,
        "uuid": _CUuuid(bytes.fromhex(sim_uuid(d.index).replace("-", ""))),
        "pci_bus_id": d.index + 1,
        "pci_device_id": 0,
        "pci_domain_id": 0,
        "L2_cache_size": spec.l2_cache_bytes or 0,
    }
    return _CudaDeviceProperties._make(values)


# --------------------------------------------------------------------------- cudart


# cudaGetErrorString of the CUDA runtime (CUDA Runtime API, "cudaError" enum)
_CUDA_ERRORS = {
    0: "no error",
    1: "invalid argument",
    2: "out of memory",
    3: "initialization error",
    4: "driver shutting down",
    34: "device not ready",
    35: "CUDA driver version is insufficient for CUDA runtime version",
    100: "no CUDA-capable device is detected",
    101: "invalid device ordinal",
    400: "invalid resource handle",
    700: "an illegal memory access was encountered",
    710: "device-side assert triggered",
    900: "operation not permitted when stream is capturing",
    999: "unknown error",
}


class cudaError(int):
    """``torch._C._cudart.cudaError``: a CUDA runtime error code (``success`` is 0)."""

    success: cudaError


cudaError.success = cudaError(0)


def _cudart(state: SimState, index: Callable[[Any], int], host: Any) -> types.ModuleType:
    """``torch._C._cudart`` (torch/csrc/cuda/shared/cudart.cpp), what ``torch.cuda.cudart()``
    returns: the calls a simulated GPU can answer."""
    cudart = types.ModuleType("torch._C._cudart")

    def error_string(code: int) -> str:
        return _CUDA_ERRORS.get(int(code), "unrecognized error code")

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        state.sync()
        d = state.devices[index(device)]
        return d.allocator.device_free_bytes, d.capacity

    def host_register(ptr: int, size: int, flags: int) -> cudaError:
        host.register(int(ptr), int(size))
        return cudaError.success

    def host_unregister(ptr: int) -> cudaError:
        return cudaError(0 if host.unregister(int(ptr)) else 1)

    handles = iter(range(0x7F2E_0000_0000, 0x7F2F_0000_0000, 0x40))

    def stream_create(ptr: int) -> cudaError:
        # cudaStreamCreate writes the new stream's handle where the caller points
        ctypes.c_uint64.from_address(int(ptr)).value = next(handles)
        return cudaError.success

    for name, fn in {
        "cudaError": cudaError,
        "cudaGetErrorString": error_string,
        "cudaProfilerStart": lambda: cudaError.success,
        "cudaProfilerStop": lambda: cudaError.success,
        "cudaMemGetInfo": mem_get_info,
        "cudaHostRegister": host_register,
        "cudaHostUnregister": host_unregister,
        "cudaStreamCreate": stream_create,
        "cudaStreamDestroy": lambda ptr: cudaError.success,
    }.items():
        setattr(cudart, name, fn)
    return cudart


def _cudnn_binding() -> types.ModuleType:
    """``torch._C._cudnn`` of the CUDA 13.0 wheel of torch 2.14.1 (cuDNN 9.24.0: the version
    its nvidia-cudnn dependency reports)."""
    cudnn = types.ModuleType("torch._C._cudnn")
    version = (CUDNN_VERSION // 10000, CUDNN_VERSION // 100 % 100, CUDNN_VERSION % 100)
    cudnn.getVersionInt = lambda: CUDNN_VERSION  # type: ignore[attr-defined]
    cudnn.getRuntimeVersion = lambda: version  # type: ignore[attr-defined]
    cudnn.getCompileVersion = lambda: version  # type: ignore[attr-defined]
    cudnn.is_cuda = True  # type: ignore[attr-defined]
    return cudnn


# ------------------------------------------------------------------ pinned host memory


# ------------------------------------------------------------------------- the bindings


def _nested(flat: dict[str, int]) -> dict[str, Any]:
    """``memory_stats()`` keys ("allocated_bytes.all.current") as the nested dict
    ``torch._C._cuda_memoryStats`` returns."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


class AllocatorState:
    """``torch._C._cuda_CUDAAllocator_AllocatorState``: an opaque checkpoint of a private
    memory pool (c10's ``PrivatePoolState``), made by ``_cuda_getCheckpointState``."""

    __slots__ = ("checkpoint",)

    def __init__(self, checkpoint: PoolCheckpoint) -> None:
        self.checkpoint = checkpoint


AllocatorState.__module__ = "torch._C"
AllocatorState.__name__ = AllocatorState.__qualname__ = "_cuda_CUDAAllocator_AllocatorState"


class _Bindings:
    """The emulated bindings of one simulation."""

    def __init__(self, state: SimState, fmode: Any) -> None:
        self.state = state
        self.fmode = fmode
        self.timeline = Timeline(state)
        state.streams = self.timeline  # the allocator's stream of a block, record_stream
        self.host = PinnedHostMemory(self.timeline, self._capturing)
        self.history = MemoryHistory()
        self.properties: dict[int, _CudaDeviceProperties] = {}
        self.raw: dict[int, int] = {}  # caching_allocator_alloc: address -> device
        self.caching_enabled = True
        self.uncached: dict[int, tuple[int, int]] = {}  # raw_alloc with caching off
        self._uncached_next = 0

    # --- devices ------------------------------------------------------------------
    def count(self) -> int:
        self.state.init_cuda()
        return len(self.state.devices)

    def check(self, device: int) -> int:
        n = self.count()
        if not 0 <= device < n:
            raise invalid_ordinal(device, n)
        return device

    def index(self, device: Any = None) -> int:
        """A device argument of a binding: an index, -1 or None for the current device."""
        if device is None:
            return self.state.current
        if isinstance(device, torch.device):
            device = self.state.current if device.index is None else device.index
        i = int(device)
        return self.state.current if i < 0 else self.check(i)

    def allocator_index(self, device: Any) -> int:
        """A device argument the caching allocator checks itself, opening no device guard
        (c10/cuda/CUDACachingAllocator.cpp assertValidDevice / checkDeviceIndex, for
        getDeviceStats and the stat resets)."""
        i = self.state.current if device is None else int(device)
        if not 0 <= i < len(self.state.devices):
            raise RuntimeError(f"Invalid device argument {i}: did you call init?")
        return i

    def lazy_init(self) -> None:
        """torch::utils::device_lazy_init(kCUDA): what C++ calls before it uses CUDA."""
        if not torch.cuda._initialized:
            torch.cuda._lazy_init()

    def cuda_init(self) -> None:
        """THCPModule_initExtension: what CUDA initialisation adds to ``torch.cuda``."""
        state = self.state
        state.init_cuda()
        state.initialized = True
        cuda = torch.cuda
        cuda.has_magma = True
        cuda.has_half = True
        cuda.default_generators = tuple(d.generator for d in state.devices)  # type: ignore[assignment]

        def get_device_properties(device: int) -> _CudaDeviceProperties:
            self.read_by_script()
            d = int(device)
            if not 0 <= d < len(state.devices):
                raise RuntimeError("Invalid device id")  # bindGetDeviceProperties
            props = self.properties.get(d)
            if props is None:
                props = self.properties[d] = _properties(state, d)
            return props

        cuda._get_device_properties = get_device_properties  # type: ignore[attr-defined]

    def read_by_script(self) -> None:
        """Note when the user's code reads the GPU's properties (through
        ``get_device_properties``, ``get_device_name``, ``is_bf16_supported``, ...): its path
        may depend on the GPU. torch's own readers (autocast's bf16 check) do not count."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename == _CUDA_INIT:
            frame = frame.f_back  # type: ignore[assignment]
        if frame is not None and is_user_file(frame.f_code.co_filename):
            self.state.decisions.add("the GPU's properties (the script read them)")

    def set_device(self, device: int) -> None:
        self.lazy_init()
        d = int(device)
        if d >= 0:
            self.state.current = self.check(d)

    def get_device(self) -> int:
        self.lazy_init()
        return self.state.current

    def exchange(self, device: int) -> int:
        if device < 0:
            return -1
        self.lazy_init()
        previous = self.state.current
        self.state.current = self.check(int(device))
        return previous

    def maybe_exchange(self, device: int) -> int:
        if device < 0:
            return -1
        previous = self.state.current
        self.state.current = self.check(int(device))
        return previous

    # --- streams --------------------------------------------------------------------
    def stream_device(self, device: Any) -> int:
        """The device of a stream query (c10/cuda/CUDAStream.cpp check_gpu)."""
        if device is None:
            return self.state.current
        if isinstance(device, torch.device):
            device = self.state.current if device.index is None else device.index
        d, n = int(device), self.count()
        if d == -1:
            return self.state.current
        if not 0 <= d < n:
            raise RuntimeError(f"Device index value {d} is out of index range [0, {n})")
        return d

    def current_stream(self, device: Any) -> tuple[int, int, int]:
        d = self.stream_device(device)
        return self.timeline.current(d), d, CUDA_TYPE

    def set_stream(self, stream_id: int = 0, device_index: int = 0, device_type: int = 0) -> None:
        # THCPModule_setStream_wrap: setting a stream of another device switches to it
        d = self.check(int(device_index))
        if d != self.state.current:
            self.state.current = d
        self.timeline.set_current(d, int(stream_id))

    def synchronize(self) -> None:
        d = self.state.current
        self.timeline.wait(d, self.state.clock(d), "synchronize")
        self.timeline.settle(self.timeline.deps(d))

    # --- memory ---------------------------------------------------------------------
    def memory_stats(self, device: Any) -> dict[str, Any]:
        self.state.sync()
        return _nested(self.state.devices[self.allocator_index(device)].allocator.stats())

    def raw_alloc(self, size: int, stream: Any = None) -> int:
        d = self.state.current
        dev = self.state.devices[d]
        if not self.caching_enabled:
            # c10 raw_alloc with the caching allocator off: a cudaMalloc of its own,
            # outside the allocator and its statistics
            try:
                dev.allocator.reserve_outside(int(size))
            except AllocatorOOM as e:
                raise torch.OutOfMemoryError(e.message(d)) from None
            self._uncached_next += -(-int(size) // 512) * 512 + 512
            address = 0x7F60_0000_0000 + self._uncached_next
            self.uncached[address] = (d, int(size))
            return address
        with self.state._lock:
            address = self.state._malloc(dev, int(size))
        self.raw[address] = d
        return address

    def raw_delete(self, ptr: int) -> None:
        uncached = self.uncached.pop(int(ptr), None)
        if uncached is not None:  # cudaFree
            self.state.devices[uncached[0]].allocator.reserve_outside(-uncached[1])
            return
        d = self.raw.pop(int(ptr), None)
        if d is None:
            raise RuntimeError("invalid device pointer: " + hex(int(ptr)))  # c10 free()
        self.state.devices[d].allocator.free(int(ptr))

    def check_pool_live_allocations(self, device: Any, pool: Any, ptrs: Any) -> bool:
        # c10/cuda/CUDACachingAllocator.cpp checkPoolLiveAllocations: the pool's live blocks
        # are exactly the pointers given (cudagraph_trees checks its outputs with it)
        self.state.sync()
        allocator = self.state.devices[self.index(device)].allocator
        return bool(allocator.live_in_pool(tuple(pool)) == {int(p) for p in ptrs})

    def checkpoint_state(self, device: Any, pool: Any) -> Any:
        # torch/csrc/cuda/Module.cpp _cuda_getCheckpointState -> CUDACachingAllocator.cpp
        # getCheckpointState: the private pool's segments, to return it to them later
        self.state.sync()
        d = self.index(device)
        checkpoint = self.state.devices[d].allocator.checkpoint_state(tuple(pool))
        return AllocatorState(checkpoint)

    def set_checkpoint_pool_state(
        self, device: Any, pps: Any, stale: Any, add_deleters: Any = ()
    ) -> None:
        """torch/csrc/cuda/Module.cpp _cuda_setCheckpointPoolState: the pool returns to the
        checkpoint (CUDACachingAllocator.cpp setCheckpointPoolState); the stale storages
        (``storage._cdata``) whose blocks it freed stop owning them; the blocks it allocated
        again are owned by the storages ``add_deleters`` names at their address, and by no
        one otherwise (freed with ``caching_allocator_delete``)."""
        if not isinstance(pps, AllocatorState):
            raise TypeError(
                "_cuda_setCheckpointPoolState(): incompatible function arguments: state must "
                f"be a torch._C._cuda_CUDAAllocator_AllocatorState, got {type(pps).__name__}"
            )
        state = self.state
        d = self.index(device)
        stale_keys = list(dict.fromkeys(int(p) for p in stale))
        with state._lock:
            state._drain()
            allocator = state.devices[d].allocator
            # Module.cpp checks this after restoring the pool; checked before here, so a
            # refused call leaves the pool and its storages as they were
            live = allocator.live_in_pool(pps.checkpoint.pool_id)
            kept = {b[0] for seg in pps.checkpoint.segments for b in seg if b[3]}
            if len(stale_keys) < len(live - kept):
                raise RuntimeError(
                    "Any stale tensors which are being manually freed must be passed to set "
                    "checkpoint"
                )
            freed, created = allocator.set_checkpoint_state(pps.checkpoint)
            freed_set, created_set = set(freed), set(created)
            for key in stale_keys:  # removeStorageDeleterFns
                rec = state.storages.get(key)
                if rec is None or rec.handle not in freed_set:
                    raise RuntimeError("Expected a stale storage's block to be freed")
                state.detach(key)
            for address in freed:
                self.raw.pop(address, None)
            owners = {rec.handle: key for key, rec in state.storages.items() if rec.device == d}
            for key in (int(p) for p in add_deleters):  # addStorageDeleterFns
                rec = state.storages.get(key)
                if rec is not None and rec.handle in created_set:
                    raise RuntimeError(" Not expecting deleter function")
                if rec is None:
                    raise RuntimeError(
                        "not simulated: giving a block back to a storage made from a data "
                        "pointer (torch._C._construct_storage_from_data_pointer)"
                    )
            for address in created:  # no one's: c10 releases the DataPtr's context
                if address not in owners:
                    self.raw[address] = d

    def record_history(
        self,
        enabled: str | None = "all",
        context: str | None = "all",
        stacks: str = "all",
        max_entries: int = 0,
        clear_history: bool = False,
        *rest: Any,
    ) -> None:
        # torch/csrc/cuda/memory_snapshot.cpp _record_memory_history: its argument checks
        if enabled is not None and enabled not in ("state", "all"):
            raise RuntimeError("expected state to be 'state', 'all', or None")
        if context is not None and context not in ("state", "alloc", "all"):
            raise RuntimeError("expected context to be 'state', 'alloc', 'all', or None")
        if stacks not in ("python", "all"):
            raise RuntimeError("expected stacks to be 'python', or 'all'")
        skip = rest[2] if len(rest) > 2 else ()
        self.state.stacks = context if enabled is not None else None
        self.state.cpp_stacks = stacks == "all"
        self.history.record(
            self.state.trace.seq, enabled, context, max_entries=int(max_entries) or None,
            clear=bool(clear_history), skip=skip,
        )  # fmt: skip

    def allocation_traceback(self, ptr: int) -> list[dict[str, Any]] | None:
        """torch.cuda.memory._allocation_traceback: the frames recorded for the live block at
        ``ptr`` (None: no such block, or no traceback was recorded for it)."""
        from torchplace.sim.snapshot import _frames, _symbolize

        state = self.state
        state.sync()
        _symbolize(state)
        for rec in list(state.storages.values()):
            if rec.handle == int(ptr):
                stack = state.trace.stacks.get(rec.trace_index)
                return _frames(state, -1, stack) if stack else None
        return None

    def record_history_legacy(
        self,
        enabled: bool,
        record_context: bool = True,
        trace_alloc_max_entries: int = 1,
        trace_alloc_record_context: bool = False,
        *rest: Any,
    ) -> None:
        # _record_memory_history_legacy: traces only with trace_alloc_max_entries > 1
        on = ("all" if trace_alloc_max_entries > 1 else "state") if enabled else None
        context = ("alloc" if trace_alloc_record_context else "state") if record_context else None
        self.history.record(
            self.state.trace.seq, on, context, max_entries=int(trace_alloc_max_entries)
        )

    def memory_snapshot(self, args: Any = None) -> dict[str, Any]:
        from torchplace.sim.snapshot import snapshot

        pool, include_traces = None, True
        if isinstance(args, tuple) and len(args) >= 2:
            if tuple(args[:2]) != (0, 0):
                pool = (int(args[0]), int(args[1]))
            if len(args) > 2:
                include_traces = bool(args[2])
        return snapshot(self.state, history=self.history, pool=pool, include_traces=include_traces)

    def table(self) -> dict[str, Any]:
        """The emulated ``torch._C`` attributes (functions and constants)."""
        state, tl, host = self.state, self.timeline, self.host

        def device_stat(method: str) -> Callable[[Any], None]:
            def call(device: Any = None) -> None:
                state.sync()
                getattr(state.devices[self.allocator_index(device)].allocator, method)()

            return call

        def jiterator(*args: Any, **kwargs: Any) -> Any:
            raise not_simulated(
                "torch.cuda.jiterator",
                "it compiles CUDA C++ with NVRTC and runs it on the GPU; write the "
                "operation with torch operators instead",
            )

        def pluggable(*args: Any, **kwargs: Any) -> Any:
            raise not_simulated(
                "pluggable CUDA allocators (torch.cuda.memory.CUDAPluggableAllocator)",
                "they call functions of a shared library on the GPU's memory; the "
                "simulator models the caching allocator only",
            )

        return {
            "_has_cuda": True,
            "_has_cudnn": True,
            "_cudnn": _cudnn_binding(),
            "_cuda_getDeviceCount": self.count,
            "_cuda_init": self.cuda_init,
            "_cuda_isInBadFork": lambda: state.bad_fork,
            "_cuda_getDevice": self.get_device,
            "_cuda_setDevice": self.set_device,
            "_cuda_exchangeDevice": self.exchange,
            "_cuda_maybeExchangeDevice": self.maybe_exchange,
            "_cuda_getArchFlags": lambda: ARCH_FLAGS,
            "_cuda_getCompiledVersion": lambda: CUDA_RUNTIME,
            "_cuda_canDeviceAccessPeer": lambda a, b: int(a) != int(b),
            "_cuda_hasPrimaryContext": lambda d: bool(torch.cuda._initialized),
            "_cuda_synchronize": self.synchronize,
            "_cuda_ipc_collect": lambda: None,
            "_cuda_sleep": lambda cycles: tl.sleep(state.current, int(cycles)),
            "_cuda_getCurrentStream": self.current_stream,
            "_cuda_getDefaultStream": lambda device: (0, self.stream_device(device), CUDA_TYPE),
            "_cuda_getCurrentRawStream": lambda device: (
                torch.cuda.current_stream(device).cuda_stream
            ),
            "_cuda_setStream": self.set_stream,
            "_cuda_getStreamFromExternal": lambda ptr, device: (
                int(ptr),
                self.index(device),
                CUDA_TYPE,
            ),
            "_cuda_getCurrentBlasHandle": lambda: 0x7F3E_0000_0000 + 0x100 * state.current,
            "_cuda_getCurrentSolverHandle": lambda: 0x7F3F_0000_0000 + 0x100 * state.current,
            "_cuda_clearCublasWorkspaces": state.clear_cublas_workspaces,
            "_cuda_jiterator_compile_and_launch_kernel": jiterator,
            # memory
            "_cuda_memoryStats": self.memory_stats,
            "_cuda_resetPeakMemoryStats": device_stat("reset_peak_stats"),
            "_cuda_resetAccumulatedMemoryStats": device_stat("reset_accumulated_stats"),
            "_cuda_emptyCache": state.empty_cache,
            "_cuda_memorySnapshot": self.memory_snapshot,
            "_cuda_setMemoryFraction": lambda fraction, device: state.devices[
                self.index(device)
            ].allocator.set_memory_fraction(fraction),
            "_cuda_getMemoryFraction": lambda device: (
                state.devices[self.index(device)].allocator.memory_fraction
            ),
            "_cuda_record_memory_history": self.record_history,
            "_cuda_memoryMetadataSupported": lambda: True,  # the native caching allocator
            "_cuda_setMemoryMetadata": lambda text: self.history.metadata.append(
                (state.trace.seq + 1, str(text))
            ),
            "_cuda_getMemoryMetadata": lambda: self.history.metadata_at(state.trace.seq + 1),
            "_cuda_allocationTraceback": self.allocation_traceback,
            "_cuda_record_memory_history_legacy": self.record_history_legacy,
            "_cuda_isHistoryEnabled": lambda: (
                bool(self.history.events) and self.history.events[-1].end is None
            ),
            "_cuda_getAllocatorBackend": lambda: "native",
            # c10/cuda/CUDACachingAllocator.cpp checkPoolLiveAllocations: the pool's live
            # blocks are exactly the pointers given (cudagraph_trees checks its outputs)
            "_cuda_checkPoolLiveAllocations": self.check_pool_live_allocations,
            "_cuda_getCheckpointState": self.checkpoint_state,
            "_cuda_setCheckpointPoolState": self.set_checkpoint_pool_state,
            "_cuda_CUDAAllocator_AllocatorState": AllocatorState,
            "_cuda_cudaCachingAllocator_raw_alloc": self.raw_alloc,
            "_cuda_cudaCachingAllocator_raw_delete": self.raw_delete,
            "_cuda_cudaCachingAllocator_enable": lambda value: setattr(
                self, "caching_enabled", bool(value)
            ),
            "_cuda_cudaCachingAllocator_is_enabled": lambda: self.caching_enabled,
            "_cuda_customAllocator": pluggable,
            "_cuda_changeCurrentAllocator": pluggable,
            # pinned host memory
            "_cuda_cudaHostAllocator": lambda: 0x7F4E_0000_0000,
            "_cuda_hostMemoryStats": host.stats,
            "_cuda_resetAccumulatedHostMemoryStats": host.reset_accumulated,
            "_cuda_resetPeakHostMemoryStats": host.reset_peak,
            "_host_emptyCache": host.empty_cache,
            "_cudart": _cudart(state, self.index, host),
            "_cuda_getAllocator": lambda: torch._C._cuda_CUDAAllocator(),
            "_cuda_attach_out_of_memory_observer": state.oom_observers.append,
            "_accelerator_getDefaultGenerator": lambda device: torch.cuda.default_generators[
                self.index(device)
            ],
            # torch.accelerator (2.6+): the same answers through its generic bindings
            "_accelerator_getAccelerator": lambda: torch.device("cuda"),
            "_accelerator_getDeviceIndex": self.get_device,
            "_accelerator_setDeviceIndex": self.set_device,
            "_accelerator_exchangeDevice": self.exchange,
            "_accelerator_maybeExchangeDevice": self.maybe_exchange,
            "_accelerator_synchronizeDevice": lambda device: self._synchronize_on(device),
            "_accelerator_getDeviceStats": self.memory_stats,
            "_accelerator_resetPeakStats": device_stat("reset_peak_stats"),
            "_accelerator_resetAccumulatedStats": device_stat("reset_accumulated_stats"),
            "_accelerator_emptyCache": state.empty_cache,
            "_accelerator_emptyHostCache": host.empty_cache,
            "_accelerator_getMemoryInfo": lambda device: _cudart_info(self, device),
            "_accelerator_isAllocatorInitialized": lambda: True,
            "_accelerator_getStream": lambda device: torch.Stream(*self.current_stream(device)),
            "_accelerator_setStream": lambda stream: self.set_stream(
                stream.stream_id, stream.device_index, stream.device_type
            ),
            "_accelerator_getDeviceCapability": lambda device=None: {
                "supported_dtypes": [torch.float32, torch.float16, torch.bfloat16]
            },
        }

    def _capturing(self, device: int) -> bool:
        capturing = getattr(self.state, "capturing", None)  # set by graph_bindings
        return bool(capturing and capturing(device, self.timeline.current(device)))

    def _synchronize_on(self, device: Any) -> None:
        d = self.index(device)
        self.timeline.wait(d, self.state.clock(d), "synchronize")
        self.timeline.settle(self.timeline.deps(d))


def _cudart_info(bindings: _Bindings, device: Any) -> tuple[int, int]:
    bindings.state.sync()
    d = bindings.state.devices[bindings.index(device)]
    return d.allocator.device_free_bytes, d.capacity


_MISSING = object()


@contextlib.contextmanager
def _cudnn_module() -> Iterator[None]:
    """What ``torch/backends/cudnn/__init__.py`` binds at import where ``torch._C._cudnn``
    exists: the binding and torch's check of it (``_init``, which the CPU build defines as
    ``return False``): a Python-level replacement, listed in docs/sim.md."""
    cudnn: Any = sys.modules["torch.backends.cudnn"]
    space = vars(getattr(cudnn, "m", cudnn))  # a PropModule wraps the module
    names = ("_cudnn", "_init", "__cudnn_version")
    saved = {k: space.get(k, _MISSING) for k in names}
    space["_cudnn"] = torch._C._cudnn
    space["__cudnn_version"] = CUDNN_VERSION
    space["_init"] = lambda: True
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is _MISSING:
                space.pop(k, None)
            else:
                space[k] = v


@contextlib.contextmanager
def installed(state: SimState, fmode: Any) -> Iterator[_Bindings]:
    """Install the emulated bindings (and torch's modules re-run over them) for the block."""
    b = _Bindings(state, fmode)
    C: Any = torch._C
    cuda: Any = torch.cuda
    classes = stream_classes(state, b.timeline)
    table = b.table()
    table.update({k: v for k, v in classes.items() if k.startswith("_")})
    table.update(graph_bindings(state, fmode, b.timeline))
    table.update(settings_bindings(state))
    table.update({"_CudaDeviceProperties": _CudaDeviceProperties, "_CUuuid": _CUuuid})
    in_torch = {"Stream": classes["Stream"], "Event": classes["Event"]}
    saved_c = {k: vars(C).get(k, _MISSING) for k in table}
    saved_torch = {k: vars(torch)[k] for k in in_torch}
    saved_cuda = dict(vars(cuda))
    saved_pinned = state.pinned
    stack = contextlib.ExitStack()
    try:
        for k, v in table.items():
            setattr(C, k, v)
        for k, v in in_torch.items():
            setattr(torch, k, v)
        state.pinned = b.host
        # torch/cuda/__init__.py: the names its import binds where the bindings exist, and
        # its lazy-initialisation state, fresh (seeds queued before the simulation stay)
        cuda._CudaDeviceProperties = _CudaDeviceProperties
        cuda._exchange_device = C._cuda_exchangeDevice
        cuda._maybe_exchange_device = C._cuda_maybeExchangeDevice
        cuda._is_in_bad_fork = C._cuda_isInBadFork
        cuda._cudart = C._cudart
        cuda._initialized = False
        cuda._tls = threading.local()
        cuda._queued_calls = list(saved_cuda["_queued_calls"])
        cuda._lazy_seed_tracker = copy.copy(saved_cuda["_lazy_seed_tracker"])
        cuda._cached_device_count = None
        cuda.default_generators = ()
        # NVML answers for the machine's real GPUs, not the simulated ones: torch falls back
        # to the runtime's device count when NVML cannot be read (torch.cuda.device_count)
        cuda._device_count_nvml = lambda: -1
        cuda._raw_device_uuid_nvml = lambda: None
        stack.enter_context(_cudnn_module())
        stack.enter_context(reloaded(_RELOADED))
        yield b
    finally:
        stack.close()
        state.pinned = saved_pinned
        for k, v in saved_torch.items():
            setattr(torch, k, v)
        for k, old in saved_c.items():
            if old is _MISSING:
                delattr(C, k)
            else:
                setattr(C, k, old)
        space = vars(cuda)
        for key in [k for k in space if k not in saved_cuda]:
            if not isinstance(space[key], types.ModuleType):
                del space[key]
        space.update(saved_cuda)
