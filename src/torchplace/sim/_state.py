"""What a simulation knows: the simulated devices, every live storage on them, and events.

Simulated tensors are ``meta`` tensors (shape, dtype and strides, no data). Which
simulated device a storage lives on is a label kept here, keyed by the storage, so views
share the label of their base. Every new storage on a simulated device is an allocation
replayed through the caching-allocator model; its death (a weakref callback) is the free.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from torchplace.cost import OpCost, transfer_seconds
from torchplace.sim.allocator import AllocatorOOM, CachingAllocatorModel

if TYPE_CHECKING:
    from torchplace.catalog import GPUSpec
    from torchplace.cost import Peaks, StepEstimate

__all__ = [
    "CATEGORIES",
    "SimDevice",
    "SimState",
    "context_bytes_for",
    "is_user_file",
    "user_frame",
]

CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "other")

_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SKIP_PREFIXES = (_TORCH_DIR, _OWN_DIR, "<frozen ", os.path.dirname(os.__file__))
# user programs that ship inside the package (the built-in examples) count as user code
_USER_FILES = (os.path.join(_OWN_DIR, "sim", "example.py"), os.path.join(_OWN_DIR, "demo.py"))


def is_user_file(filename: str) -> bool:
    """Whether a frame's file is the user's code (not torch, torchplace or the stdlib)."""
    return filename in _USER_FILES or not filename.startswith(_SKIP_PREFIXES)


# CUDA context size outside the caching allocator, by compute-capability major. These are
# estimates: ptrblck measures ~300 MB with lazy module loading on CUDA >= 11.7
# (pytorch#107667); users report up to 843 MB (pytorch#86493); newer architectures load
# larger kernel images. Override with simulate(context_bytes=...) / --context-size.
_CONTEXT_MIB_BY_MAJOR = {7: 300, 8: 400, 9: 500, 10: 600, 12: 500}
# cuBLAS workspace, allocated through the caching allocator at the first matmul on a device
# (CUBLAS_WORKSPACE_CONFIG default in c10/cuda/CUDABlas / CublasHandlePool: 8 MiB before
# Hopper, 32 MiB on sm90 and later).
_MIB = 1024**2


def context_bytes_for(spec: GPUSpec) -> int:
    """The CUDA context size assumed for a GPU (outside the caching allocator)."""
    major = spec.compute_capability[0] if spec.compute_capability else 9
    return _CONTEXT_MIB_BY_MAJOR.get(major, 500) * _MIB


def _cublas_workspace_bytes(spec: GPUSpec) -> int:
    major = spec.compute_capability[0] if spec.compute_capability else 9
    return (32 if major >= 9 else 8) * _MIB


def user_frame() -> tuple[str, int] | None:
    """File and line of the innermost frame that belongs to the user's code."""
    frame = sys._getframe(1)
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


@dataclass
class _Storage:
    device: int
    nbytes: int
    handle: int
    phase: str
    scope: str | None


@dataclass
class SimDevice:
    """One simulated GPU: its spec, capacity and allocator model."""

    index: int
    spec: GPUSpec
    capacity: int
    context_bytes: int
    allocator: CachingAllocatorModel
    peak_allocated: int = 0  # over the whole run (torch.cuda.reset_peak_memory_stats keeps it)
    peak_breakdown: dict[str, int] = field(default_factory=dict)
    peak_scopes: dict[str, int] = field(default_factory=dict)
    cublas_ready: bool = False
    snapshot_at: int = 0

    @property
    def allocated(self) -> int:
        """Live storage bytes, 512-rounded (what ``torch.cuda.memory_allocated`` reports)."""
        return self.allocator.allocated_bytes


@dataclass
class SimState:
    """Everything one simulation records. Thread-safe for the autograd worker threads."""

    devices: list[SimDevice]
    peaks: Peaks | None = None
    current: int = 0
    storages: dict[int, _Storage] = field(default_factory=dict)
    transfers: dict[str, list[int]] = field(
        default_factory=lambda: {"h2d": [0, 0], "d2h": [0, 0], "d2d": [0, 0]}
    )
    syncs: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    oom: dict[str, Any] | None = None
    estimates: list[StepEstimate] = field(default_factory=list)
    phase: str = "other"
    scopes: list[str] = field(default_factory=list)
    optimizers: weakref.WeakSet[torch.optim.Optimizer] = field(default_factory=weakref.WeakSet)
    modules: weakref.WeakSet[torch.nn.Module] = field(default_factory=weakref.WeakSet)
    _pending_frees: list[int] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    @classmethod
    def create(
        cls,
        spec: GPUSpec,
        *,
        gpus: int,
        capacity: int | None = None,
        context_bytes: int | None = None,
        peaks: Peaks | None = None,
    ) -> SimState:
        cap = spec.torch_total_bytes if capacity is None else capacity
        ctx = context_bytes_for(spec) if context_bytes is None else context_bytes
        devices = [
            SimDevice(i, spec, cap, ctx, CachingAllocatorModel(cap, reserved_outside=ctx))
            for i in range(gpus)
        ]
        return cls(devices=devices, peaks=peaks)

    # --- storages -------------------------------------------------------------------
    def label(self, t: torch.Tensor) -> int | None:
        """The simulated device index of a meta tensor, or None for a user's own meta tensor."""
        if self._pending_frees:
            self.sync()  # a dead storage's address may already belong to a new one
        rec = self.storages.get(t.untyped_storage()._cdata)
        return None if rec is None else rec.device

    def register(self, t: torch.Tensor, device: int) -> None:
        """Account for ``t``'s storage on ``device`` if it is new (views are not)."""
        if self._pending_frees:
            self.sync()
        storage = t.untyped_storage()
        key = storage._cdata
        rec = self.storages.get(key)
        nbytes = storage.nbytes()
        if rec is not None:
            if rec.nbytes == nbytes or nbytes < rec.nbytes:
                return
            self._free_key(key)  # resize_ grew the storage: a new block
        with self._lock:
            self._drain()
            dev = self.devices[device]
            handle = self._malloc(dev, nbytes)
            scope = self.scopes[-1] if self.scopes else None
            self.storages[key] = _Storage(device, nbytes, handle, self.phase, scope)
            weakref.finalize(storage, self._pending_frees.append, key)
            self._after_alloc(dev)

    def _malloc(self, dev: SimDevice, nbytes: int) -> int:
        try:
            handle = dev.allocator.malloc(nbytes)
        except AllocatorOOM as e:
            where = user_frame()
            self.oom = {
                "device": dev.index,
                "requested_bytes": int(e.requested),
                "file": where[0] if where else None,
                "line": where[1] if where else None,
                "message": e.message(dev.index),
            }
            raise torch.OutOfMemoryError(e.message(dev.index)) from None
        return handle

    def ensure_cublas_workspace(self, device: int) -> None:
        """cuBLAS allocates its workspace through the caching allocator at the first GEMM."""
        dev = self.devices[device]
        if not dev.cublas_ready:
            dev.cublas_ready = True
            with self._lock:
                self._malloc(dev, _cublas_workspace_bytes(dev.spec))
                self.notes["cuBLAS workspace allocated at the first matrix multiply"] += 1
                self._after_alloc(dev)

    def _free_key(self, key: int) -> None:
        rec = self.storages.pop(key, None)
        if rec is not None:
            dev = self.devices[rec.device]
            dev.allocator.free(rec.handle)

    def _drain(self) -> None:
        while self._pending_frees:
            self._free_key(self._pending_frees.pop())

    def sync(self) -> None:
        """Process frees that are pending (storage deaths are recorded asynchronously)."""
        with self._lock:
            self._drain()

    def empty_cache(self) -> None:
        with self._lock:
            self._drain()
            for dev in self.devices:
                dev.allocator.empty_cache()

    # --- peaks ------------------------------------------------------------------------
    def _after_alloc(self, dev: SimDevice) -> None:
        if dev.allocated <= dev.peak_allocated:
            return
        dev.peak_allocated = dev.allocated
        # The breakdown costs a walk over live storages: refresh it when the peak has grown
        # by 1% (or 1 MiB) since the last one, so it stays within 1% of the exact peak.
        if dev.allocated >= max(dev.snapshot_at * 1.01, dev.snapshot_at + _MIB):
            self._snapshot(dev)

    def _snapshot(self, dev: SimDevice) -> None:
        dev.snapshot_at = dev.allocated
        kinds: dict[int, str] = {}
        # Parameters are found through their modules and optimizers (weak references to the
        # tensors themselves would stop Module.to() from swapping them).
        params = [p for m in list(self.modules) for p in m.parameters(recurse=False)]
        opts = list(self.optimizers)
        params += [p for opt in opts for group in opt.param_groups for p in group["params"]]
        for p in params:
            kinds[p.untyped_storage()._cdata] = "parameters"
            if p.grad is not None:
                kinds[p.grad.untyped_storage()._cdata] = "gradients"
        for opt in opts:
            for state in opt.state.values():
                for v in state.values():
                    if isinstance(v, torch.Tensor):
                        kinds.setdefault(v.untyped_storage()._cdata, "optimizer_state")
        breakdown = dict.fromkeys(CATEGORIES, 0)
        if dev.cublas_ready:
            breakdown["other"] += _cublas_workspace_bytes(dev.spec)
        scopes: Counter[str] = Counter()
        for key, rec in list(self.storages.items()):
            if rec.device != dev.index:
                continue
            kind = kinds.get(key)
            if kind is None:
                kind = "activations" if rec.phase in ("forward", "backward") else "other"
                if kind == "activations":
                    scopes[rec.scope or "(backward)"] += rec.nbytes
            breakdown[kind] += rec.nbytes
        dev.peak_breakdown = breakdown
        dev.peak_scopes = dict(scopes.most_common(10))

    # --- events -------------------------------------------------------------------------
    def transfer(self, kind: str, nbytes: int) -> None:
        """Count a copy; host copies are also priced at the host link's speed."""
        counts = self.transfers[kind]
        counts[0] += 1
        counts[1] += nbytes
        if self.peaks is not None and self.estimates and kind != "d2d":
            seconds = transfer_seconds(nbytes, self.peaks, "h2d" if kind == "h2d" else "d2h")
            cost = OpCost(f"copy {kind}", 0.0, nbytes, seconds, "memory")
            self.estimates[self.current].add(cost, None)

    def record_sync(self, kind: str) -> None:
        where = user_frame() or ("<unknown>", 0)
        self.syncs[(kind, where[0], where[1])] += 1

    def note(self, text: str) -> None:
        self.notes[text] += 1
