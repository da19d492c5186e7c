"""What a simulation knows: the simulated devices, every live storage on them, and events.

A simulated tensor is an ordinary tensor on the run's *backing* device — ``meta`` (no
data: placeholder values, any model size) or ``cpu`` (real values) — whose storage the
simulator has labelled with a simulated CUDA device. Labels are kept here, keyed by the
storage, so views share the label of their base; everything else (device rules,
accounting, transfers, syncs, costs) works the same on either backing. Every new storage
on a simulated device is an allocation replayed through the caching-allocator model; its
death (a weakref callback) is the free.
"""

from __future__ import annotations

import functools
import operator
import os
import re
import runpy
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from torchplace.cost import OpCost, transfer_seconds
from torchplace.sim.accounting._comm import Topology
from torchplace.sim.accounting._hostmem import HostMemoryError, HostRoom, host_memory
from torchplace.sim.accounting._trace import CATEGORY_NAMES, WORKSPACE, Trace
from torchplace.sim.allocator import AllocatorOOM, CachingAllocatorModel

if TYPE_CHECKING:
    from torchplace.catalog import GPUSpec
    from torchplace.cost import Peaks, StepEstimate

__all__ = [
    "BAD_FORK",
    "CATEGORIES",
    "SimDevice",
    "SimState",
    "context_bytes_for",
    "is_user_file",
    "storage_key",
    "user_frame",
]

CATEGORIES = CATEGORY_NAMES  # what the memory at the peak is broken down into

#: CUDA's error for a forked child that uses CUDA after its parent did (torch/cuda/__init__.py
#: _lazy_init).
BAD_FORK = (
    "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
    "you must use the 'spawn' start method"
)

_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_DIR = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)  # torchplace/
_SKIP_PREFIXES = (_TORCH_DIR, _OWN_DIR, "<frozen ", os.path.dirname(os.__file__))
# a storage's real device (a simulation answers ``storage.device`` with its simulated one)
_STORAGE_DEVICE = torch._C.StorageBase.device  # type: ignore[attr-defined]
# user programs that ship inside the package (the built-in examples) count as user code
_USER_FILES = (os.path.join(_OWN_DIR, "sim", "example.py"), os.path.join(_OWN_DIR, "demo.py"))
_RUNPY = runpy.__file__


def is_user_file(filename: str) -> bool:
    """Whether a frame's file is the user's code (not torch, torchplace or the stdlib)."""
    return filename in _USER_FILES or not filename.startswith(_SKIP_PREFIXES)


# CUDA context size outside the caching allocator, by compute-capability major. These are
# estimates: ptrblck measures ~300 MB with lazy module loading on CUDA >= 11.7
# (pytorch#107667); users report up to 843 MB (pytorch#86493); newer architectures load
# larger kernel images. Override with simulate(context_bytes=...) / --context-size.
_CONTEXT_MIB_BY_MAJOR = {7: 300, 8: 400, 9: 500, 10: 600, 12: 500}
# cuBLAS workspace, allocated through the caching allocator at the first matmul on a device
# (see cublas_workspace_bytes).
_MIB = 1024**2
_GIB = 1024**3
_ONE_EXA_BYTES = 2**60  # c10/cuda/CUDACachingAllocator.cpp one_exa_bytes


def _size(nbytes: int) -> str:
    from torchplace._units import format_bytes

    return format_bytes(nbytes)


def context_bytes_for(spec: GPUSpec) -> int:
    """The CUDA context size assumed for a GPU (outside the caching allocator)."""
    major = spec.compute_capability[0] if spec.compute_capability else 9
    return _CONTEXT_MIB_BY_MAJOR.get(major, 500) * _MIB


def cublas_workspace_bytes(spec: GPUSpec, override: int | None = None) -> int:
    """cuBLAS's workspace size, as aten/src/ATen/cuda/CublasHandlePool.cpp
    ``getChosenWorkspaceSize`` chooses it: the size set through
    ``torch.backends.cuda.cublas_workspace_size``, else ``CUBLAS_WORKSPACE_CONFIG``'s
    ``:SIZE_KIB:COUNT`` pairs summed, else ``:4096:2:16:8`` (8 MiB + 128 KiB), 32 MiB on
    compute capability 9 to 12."""
    if override is not None:
        return override
    major = spec.compute_capability[0] if spec.compute_capability else 9
    default = 4096 * 8 * 1024 if 9 <= major <= 12 else 4096 * 1024 * 2 + 16 * 1024 * 8
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if config is None:
        return default
    pairs = re.findall(r":([0-9]+):([0-9]+)", config)
    if not pairs:  # torch warns "Could not parse CUBLAS_WORKSPACE_CONFIG" and uses default
        return default
    return sum(int(size) * 1024 * int(count) for size, count in pairs)


def visible_devices(var: str, count: int) -> list[int]:
    """The physical GPUs ``CUDA_VISIBLE_DEVICES=var`` shows on a machine with ``count``.

    As torch/cuda/__init__.py ``_parse_visible_devices`` and ``_device_count_nvml`` read it:
    comma-separated ordinals (or ``GPU-<uuid prefix>``); parsing stops at the first entry
    that is not a non-negative number or is past the last GPU; a repeated entry hides all.

    Examples:
        >>> visible_devices("1,0", 2), visible_devices("0,0", 2), visible_devices("1,5,0", 4)
        ([1, 0], [], [1])
        >>> visible_devices("", 2), visible_devices("GPU-51a00001", 2)
        ([], [1])
    """
    out: list[int] = []
    for elem in var.split(","):
        elem = elem.strip()
        if elem.startswith("GPU-"):
            matches = [i for i in range(count) if sim_uuid(i).startswith(elem[4:])]
            index = matches[0] if len(matches) == 1 else -1
        else:
            digits = elem[1:] if elem[:1] in "+-" else elem
            n = len(digits) - len(digits.lstrip("0123456789"))
            index = int(elem[: n + (len(elem) - len(digits))]) if n else -1
        if index in out:
            return []
        if index < 0 or index >= count:
            break
        out.append(index)
    return out


def sim_uuid(index: int) -> str:
    """The UUID a simulated GPU reports (``nvidia-smi -L`` shows it as ``GPU-<uuid>``)."""
    return f"51a0{index:04x}-0000-4000-8000-000000000000"


def user_frame() -> tuple[str, int] | None:
    """File and line of the innermost frame that belongs to the user's code."""
    found = _user_code_frame()
    return None if found is None else (found[0], found[1])


def _user_code_frame() -> tuple[str, int, str] | None:
    """File, line and function of the innermost frame of the user's code."""
    frame = sys._getframe(2)
    known = _USER_FILE
    while frame is not None:
        code = frame.f_code
        user = known.get(code.co_filename)
        if user is None:
            user = known[code.co_filename] = is_user_file(code.co_filename)
        if user:
            return code.co_filename, frame.f_lineno, code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    return None


_PLAIN_TENSORS = frozenset((torch.Tensor, torch.nn.Parameter))
_STRIDED = torch.strided
# A tensor's storage key, t.untyped_storage()._cdata (the StorageImpl's address), read
# without making the storage's Python object, and not a Tensor method: no torch function
# mode sees the call, so it needs none disabled. (Sparse and opaque tensors raise the same
# NotImplementedError.)
storage_key: Callable[[torch.Tensor], int] = torch._C._storage_id  # type: ignore[attr-defined]
_tf_enabled = torch._C._is_torch_function_mode_enabled
# file name -> is_user_file(file name): every allocation walks the stack
_USER_FILE: dict[str, bool] = {}

OUTSIDE, UNKNOWN = "outside a call", "not looked up yet"


class CallSite(threading.local):
    """Where the allocations of the torch function call running now come from.

    Each allocation of the trace names the user's line that made it, found by walking the
    stack (~250 bytecodes). The Python stack does not change while one torch function runs
    in C++, so its allocations (an optimizer's foreach op makes one per parameter, the
    backward pass all of its own) share one walk: the function mode sets ``frame`` to
    UNKNOWN at each call and back when it returns; OUTSIDE (no call running) walks every time.
    """

    frame: tuple[str, int, str] | str | None = OUTSIDE

    def user_code_frame(self) -> tuple[str, int, str] | None:
        frame = self.frame
        if frame is OUTSIDE:
            return _user_code_frame()
        if frame is UNKNOWN:
            frame = self.frame = _user_code_frame()
        return frame  # type: ignore[return-value]


def _fsdp_unsharded(module: torch.nn.Module) -> list[torch.Tensor]:
    """The full parameters an FSDP2 module (``fully_shard``) has gathered and holds now."""
    get_state = getattr(module, "_get_fsdp_state", None)
    group = getattr(get_state(), "_fsdp_param_group", None) if get_state else None
    if group is None:
        return []
    params = (getattr(fp, "_unsharded_param", None) for fp in group.fsdp_params)
    return [p for p in params if p is not None and p.untyped_storage().nbytes() > 0]


class _StorageRef(weakref.ref):
    """A weak reference to a simulated storage that knows the storage's key: its callback
    reports the death. ``weakref.KeyedRef`` without its two Python-level constructor calls
    (one reference per new storage)."""

    __slots__ = ("key", "stack")
    key: int
    stack: Any  # the Python stack where it died, while tracebacks are recorded


def _gather_traceback(python: bool, script: bool, cpp: bool) -> Any:
    from torch._C._profiler import gather_traceback

    return gather_traceback(python, script, cpp)


def python_stack(skip: int = 1) -> list[tuple[str, int, str]]:
    """The Python stack, innermost first, as torch's CapturedTraceback has it for
    ``torch.cuda.memory._record_memory_history(stacks="python")``, without the simulator's
    own frames nor the ``runpy`` frames through which ``torchplace sim`` runs the script (a
    script run with ``python script.py`` has none)."""
    out: list[tuple[str, int, str]] = []
    runner = -1  # where a run of runpy frames began in ``out``
    frame: Any = sys._getframe(skip)
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if name.startswith(_OWN_DIR) and name not in _USER_FILES:
            if runner >= 0:  # runpy called by the simulator's runner
                del out[runner:]
                runner = -1
        else:
            if name != _RUNPY:
                runner = -1
            elif runner < 0:
                runner = len(out)
            out.append((name, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return out


@dataclass(slots=True)
class _Storage:
    device: int
    nbytes: int
    handle: int
    phase: str
    scope: str | None
    trace_index: int = -1
    stream: int = 0  # the stream it was allocated on
    uses: set[int] | None = None  # other streams it was used on (record_stream)


@dataclass
class SimDevice:
    """One simulated GPU: its spec, capacity, allocator model and random generator."""

    index: int
    spec: GPUSpec
    capacity: int
    context_bytes: int
    allocator: CachingAllocatorModel
    generator: torch.Generator = field(default_factory=torch.Generator)
    peak_allocated: int = 0  # over the whole run (torch.cuda.reset_peak_memory_stats keeps it)
    peak_breakdown: dict[str, int] = field(default_factory=dict)
    peak_scopes: dict[str, int] = field(default_factory=dict)
    cublas_ready: bool = False
    cublas_workspace: tuple[int, int] | None = None  # its allocator handle and trace index
    snapshot_at: int = 0
    estimate: StepEstimate | None = None  # the cost model's running total for this GPU
    step_marks: list[float] = field(default_factory=lambda: [0.0])  # estimate at each step
    # the GPU time up to which the host has seen this device's work done, and when it looked
    # (torchplace.sim.emulation._bindings_streams.Timeline)
    done: float = 0.0
    done_wall: float = 0.0
    # blocks freed while other streams used them: (GPU time their work ends, handle)
    pending: list[tuple[float, int]] = field(default_factory=list)
    # (clock, GPU busy, host, samples, tokens) at the start and after every optimizer step
    # (time_marks), or at every call of an outermost module (call_marks): a step's split
    time_marks: list[tuple[float, ...]] = field(default_factory=lambda: [(0.0,) * 5])
    call_marks: list[tuple[float, ...]] = field(default_factory=list)

    @property
    def allocated(self) -> int:
        """Live storage bytes, 512-rounded (what ``torch.cuda.memory_allocated`` reports)."""
        return self.allocator.allocated_bytes

    @property
    def capability(self) -> tuple[int, int] | None:
        return self.spec.compute_capability


@dataclass
class SimState:
    """Everything one simulation records. Thread-safe for the autograd worker threads."""

    devices: list[SimDevice]
    backing: torch.device = field(default_factory=lambda: torch.device("meta"))
    peaks: Peaks | None = None
    host_limit: int | None = None  # real values: the most host memory simulated data may take
    host_bytes: int = 0
    host_peak: int = 0  # the most host_bytes reached
    host_limit_given: bool = False  # host_limit is the user's (not the default)
    # Whether simulated tensors hold real values now; host_backed: whether their backing is
    # the host (real values, and placeholder values after a switch in place: see
    # switch_to_placeholders). room: how much more host memory real values may take.
    real: bool = False
    # host_bytes counts new storages: the real values held, or with placeholder values those
    # real values would take (host_peak says so in the report); not after a switch
    counts_host: bool = False
    host_backed: bool = False
    auto: bool = False  # values="auto": short of host memory, switch instead of stopping
    room: HostRoom | None = None
    switched: dict[str, Any] | None = None  # where and why placeholder values began
    scout: Any = None  # values="auto"'s scout (torchplace.sim._values.Scout), while it looks
    host_weight_bytes: int = 0  # parameters built on the host, then moved to a GPU
    storages: dict[int, _Storage] = field(default_factory=dict)
    transfers: dict[str, list[int]] = field(
        default_factory=lambda: {"h2d": [0, 0], "d2h": [0, 0], "d2d": [0, 0]}
    )
    syncs: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    # (kind, file, line) of the user's line -> [count, bytes]
    transfer_sites: dict[tuple[str, str, int], list[int]] = field(default_factory=dict)
    notes: Counter[str] = field(default_factory=Counter)
    files: list[dict[str, Any]] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)
    kinds: dict[int, str] = field(default_factory=dict)  # storage key -> parameters, ...
    history: list[tuple[int, int | None]] = field(default_factory=list)  # _record_memory_history
    decisions: set[str] = field(default_factory=set)  # choices the GPU model made
    topology: Topology = field(default_factory=Topology)
    category_override: str | None = None  # every new storage is this (DDP's buckets)
    oom: dict[str, Any] | None = None
    phase: str = "other"
    scopes: list[str] = field(default_factory=list)
    initialized: bool = False  # CUDA was touched (a forked child then may not use it)
    capture: Any = (
        None  # the CUDA graph capture under way (torchplace.sim.emulation._bindings_graphs)
    )
    bad_fork: bool = False  # this process was forked after its parent touched CUDA
    cublas_workspace_override: int | None = None  # torch.backends.cuda.cublas_workspace_size
    oom_observers: list[Any] = field(default_factory=list)  # called before an OOM error
    # the context a memory history records tracebacks for ("state", "alloc", "all"; None:
    # none): whole Python stacks are kept for allocations, and with "all" for frees too
    stacks: str | None = None
    cpp_stacks: bool = False  # stacks="all": C++ frames too (torch's CapturedTraceback)
    side_streams: bool = False  # a stream other than the default one has been current
    # the streams' timeline (torchplace.sim.emulation._bindings_streams.Timeline): each
    # thread's current stream, when a stream's work ends, whether the host has seen it done
    streams: Any = None
    optimizers: weakref.WeakSet[torch.optim.Optimizer] = field(default_factory=weakref.WeakSet)
    modules: weakref.WeakSet[torch.nn.Module] = field(default_factory=weakref.WeakSet)
    # pinned host storages; during a simulation the host caching allocator (_bindings_host)
    pinned: Any = field(default_factory=weakref.WeakSet)
    # what the outermost modules were called on: samples (their first tensor's first
    # dimension) and tokens (its elements, where it holds integer token ids)
    batch_seen: list[int] = field(default_factory=lambda: [0, 0])
    physical: list[SimDevice] = field(default_factory=list)  # every simulated GPU
    visible_note: str | None = None
    _frozen: bool = False  # CUDA_VISIBLE_DEVICES was read (at the first CUDA call)
    _current: threading.local = field(default_factory=threading.local)
    site: CallSite = field(default_factory=CallSite)
    _pending_frees: list[_StorageRef] = field(default_factory=list)  # of dead storages
    # storage key -> the weak reference whose callback reports the storage's death
    _refs: dict[int, _StorageRef] = field(default_factory=dict)
    _emptied: dict[int, int] = field(default_factory=dict)  # resized to 0 bytes: its device
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _died: Callable[[_StorageRef], None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # The weakref callback of a simulated storage: it died (any thread, any moment). No
        # reference to self: a finished simulation's state goes without a garbage collection;
        # and no Python frame (a storage dies for every one made).
        self._died = self._pending_frees.append

    @classmethod
    def create(
        cls,
        spec: GPUSpec,
        *,
        gpus: int,
        capacity: int | None = None,
        context_bytes: int | None = None,
        peaks: Peaks | None = None,
        real: bool = False,
        host_limit: int | None = None,
        auto: bool = False,
    ) -> SimState:
        cap = spec.torch_total_bytes if capacity is None else capacity
        ctx = context_bytes_for(spec) if context_bytes is None else context_bytes
        devices = [
            SimDevice(
                i, spec, cap, ctx, CachingAllocatorModel(cap, reserved_outside=ctx, device_index=i)
            )
            for i in range(gpus)
        ]
        backing = torch.device("cpu" if real else "meta")
        state = cls(
            devices=devices, physical=list(devices), backing=backing, peaks=peaks,
            host_limit=host_limit, real=real, counts_host=True, host_backed=real,
            auto=auto and real,
            room=HostRoom(host_limit) if real else None,
        )  # fmt: skip
        for dev in devices:
            dev.allocator.segment_hook = functools.partial(state._segment, dev)
        return state

    def _segment(self, dev: SimDevice, kind: str, address: int, size: int) -> None:
        stack: Any = None
        split = False
        if self.stacks is not None:  # the segment's context (c10's context_when_segment_allocated)
            stack = _gather_traceback(True, True, True) if self.cpp_stacks else python_stack()
            split = kind == "segment_free" and address in dev.allocator.split_segments
        self.trace.segment(dev.index, kind, address, size, self.clock(dev.index), stack, split)

    def clock(self, device: int) -> float:
        """The cost model's running time on ``device`` (seconds), the trace's time axis."""
        estimate = self.devices[device].estimate
        return estimate.seconds if estimate is not None else 0.0

    def classify(self, tensors: torch.Tensor | Iterable[torch.Tensor], kind: str) -> None:
        """Record what simulated tensors are (parameters, gradients, optimizer_state)."""
        with torch._C.DisableTorchFunction():  # called from hooks: the simulation's own reads
            self._classify((tensors,) if isinstance(tensors, torch.Tensor) else tensors, kind)

    def _classify(self, tensors: Iterable[torch.Tensor], kind: str) -> None:
        for t in tensors:
            t = getattr(t, "_local_tensor", t)  # a DTensor: its shard
            if self.label(t) is not None:
                self.kinds[storage_key(t)] = kind

    def init_cuda(self) -> None:
        """Read ``CUDA_VISIBLE_DEVICES`` as CUDA does, once, at the first CUDA call: the
        script sees the listed simulated GPUs, renumbered from 0.

        Raises:
            RuntimeError: in a process forked after its parent used CUDA, as CUDA does.
        """
        if self.bad_fork:
            raise RuntimeError(BAD_FORK)
        if self._frozen:
            return
        self._frozen = True
        var = os.environ.get("CUDA_VISIBLE_DEVICES")
        if var is None:
            return
        visible = visible_devices(var, len(self.physical))
        self.devices = [self.physical[i] for i in visible]
        for logical, dev in enumerate(self.devices):
            dev.index = logical
            dev.allocator._device_index = logical
        shown = ", ".join(f"cuda:{n} = simulated GPU {p}" for n, p in enumerate(visible))
        self.visible_note = (
            f"CUDA_VISIBLE_DEVICES={var}: the script saw {len(visible)} of "
            f"{len(self.physical)} simulated GPUs" + (f" ({shown})" if shown else "")
        )
        self.note(self.visible_note)

    @functools.cached_property
    def _on_backing(self) -> Callable[[torch.Tensor], bool]:
        """Whether a tensor is on the backing device (``t.is_cpu``: ten times cheaper than
        ``t.device.type``, which makes a device object)."""
        return operator.attrgetter("is_cpu" if self.host_backed else "is_meta")

    @property
    def current(self) -> int:
        """The current device of this thread (``torch.cuda.current_device()``)."""
        return getattr(self._current, "index", 0)

    @current.setter
    def current(self, index: int) -> None:
        self._current.index = index

    # --- storages -------------------------------------------------------------------
    def label(self, t: torch.Tensor) -> int | None:
        """The simulated device index of ``t``, or None for a tensor of a real device.

        Callable with the simulation's function mode active (hooks, patched methods, the
        backward pass): a storage's key is read by no torch function, and a subclass's real
        device with torch functions disabled.
        """
        if type(t) not in _PLAIN_TENSORS:  # (a plain one needs no device test: see labels_of)
            local = getattr(t, "_local_tensor", None)  # a DTensor: the device of its shard
            if local is not None:
                return self.label(local)
            if not self._backed(t):
                return None
        if self._pending_frees:
            self.sync()  # a dead storage's address may already belong to a new one
        try:
            key = storage_key(t)
        except (RuntimeError, NotImplementedError):  # no storage (sparse)
            return None
        rec = self.storages.get(key)
        return self._emptied.get(key) if rec is None else rec.device

    def _backed(self, t: torch.Tensor) -> bool:
        """Whether a tensor subclass's data is strided, on the backing device."""
        if _tf_enabled():
            with torch._C.DisableTorchFunction():
                return self._backed(t)
        return self._on_backing(t) and t.layout is _STRIDED

    def labels_of(self, tensors: list[torch.Tensor]) -> tuple[dict[int, int], bool]:
        """The labels of an operation's tensors by ``id`` (those on simulated devices), and
        whether some tensor is not on one: ``_label`` of each, its common case inlined."""
        if self._pending_frees:
            self.sync()
        labels: dict[int, int] = {}
        on_host = False
        storages, emptied = self.storages, self._emptied
        for t in tensors:
            if type(t) in _PLAIN_TENSORS:
                # No device or layout test first: only storages on the backing device are
                # ever registered, so any other storage's key is simply not found (two calls
                # into torch fewer for each tensor of every operation).
                try:
                    key = storage_key(t)
                except (RuntimeError, NotImplementedError):  # no storage (sparse)
                    on_host = True
                    continue
                rec = storages.get(key)
                label = rec.device if rec is not None else emptied.get(key)
            else:
                label = self.label(t)
            if label is None:
                on_host = True
            else:
                labels[id(t)] = label
        return labels, on_host

    def storage_label(self, storage: Any) -> int | None:
        """The simulated device of an ``UntypedStorage``, or None."""
        # the storage's real device (the simulation answers ``storage.device`` from this)
        if _STORAGE_DEVICE.__get__(storage).type != self.backing.type:
            return None
        if self._pending_frees:
            self.sync()
        rec = self.storages.get(storage._cdata)
        return self._emptied.get(storage._cdata) if rec is None else rec.device

    def register(self, t: torch.Tensor, device: int) -> None:
        """Account for ``t``'s storage on ``device`` if it is new (views are not)."""
        self.register_storage(t.untyped_storage(), device)

    def register_storage(
        self, storage: Any, device: int, nbytes: int | None = None, *, finalize: bool = True
    ) -> None:
        """Account for an ``UntypedStorage`` on ``device`` if it is new; ``nbytes`` (the
        size a GPU kernel would have given a tensor the CPU computed) re-accounts it."""
        with self._lock:
            if self._pending_frees:
                self._drain()  # a dead storage's address may belong to this one now
            key = storage._cdata
            rec = self.storages.get(key)
            if rec is not None:
                if nbytes is None and storage.nbytes() <= rec.nbytes:
                    return
                self._free_key(key)  # re-accounted, or resize_ grew the storage: a new block
            if nbytes is None:
                nbytes = storage.nbytes()
            self.initialized = True
            dev = self.devices[device]
            stream = 0 if self.streams is None else self.streams.current(device)
            handle = self._malloc(dev, nbytes, stream)
            if self.counts_host:
                self.host_bytes += nbytes
                if self.host_bytes > self.host_peak:
                    self.host_peak = self.host_bytes
                if self.host_limit is not None and self.host_bytes > self.host_limit:
                    self._over_host_limit()  # (sizes not foreseen: the check before the op)
            scope = self.scopes[-1] if self.scopes else None
            estimate = dev.estimate  # self.clock(device), inline
            time = estimate.seconds if estimate is not None else 0.0
            index = self.trace.alloc(
                dev.index, nbytes, handle, time, self.phase, scope, self.site.user_code_frame()
            )
            self.storages[key] = _Storage(device, nbytes, handle, self.phase, scope, index, stream)
            if self.category_override is not None:
                self.kinds[key] = self.category_override
            if self.stacks:
                if self.cpp_stacks:  # the C++ stack of the operation making it, too
                    self.trace.tracebacks[index] = _gather_traceback(True, True, True)
                else:
                    self.trace.stacks[index] = self.trace.stack(python_stack())
            if finalize:
                ref = self._refs[key] = _StorageRef(
                    storage, self._died_with_stack if self.stacks else self._died
                )
                ref.key = key
            if dev.allocator.allocated_bytes > dev.peak_allocated:
                self._after_alloc(dev)

    def resize_storage(self, storage: Any, device: int, nbytes: int) -> None:
        """``UntypedStorage.resize_`` of a simulated storage. On CUDA it allocates a block of
        the new size (none for 0), copies, and frees the old block (``resize_bytes_cuda``,
        aten/src/ATen/native/cuda/Resize.cpp); FSDP2 frees and re-allocates its unsharded
        parameters this way (``free_storage``/``alloc_storage`` in _fsdp_param.py)."""
        key = storage._cdata
        if self._pending_frees:
            self.sync()
        rec = self.storages.get(key)
        if rec is not None and rec.nbytes == nbytes:
            return
        if nbytes == 0:
            if rec is not None:
                self._free_key(key)
            self._emptied[key] = device
            return
        old_kind = self.kinds.get(key)
        if rec is None:  # an emptied storage grows again: it has its finalizer already
            self._emptied.pop(key, None)
        else:
            self._free_key(key)
            self._emptied[key] = device
        self.register_storage(storage, device, nbytes, finalize=False)
        self._emptied.pop(key, None)
        if old_kind is not None:
            self.kinds[key] = old_kind

    def address(self, storage: Any) -> int | None:
        """The simulated device address of a storage (its block's), or None."""
        rec = self.storages.get(storage._cdata)
        return None if rec is None else rec.handle

    def _malloc(self, dev: SimDevice, nbytes: int, stream: int = 0) -> int:
        if nbytes >= _ONE_EXA_BYTES:  # NativeCachingAllocator::allocate's first check
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate more than 1EB memory."
            )
        if dev.pending:
            self._process_events(dev)
        try:
            try:
                handle = dev.allocator.malloc(nbytes, stream=stream)
            except AllocatorOOM:
                if not dev.pending:
                    raise
                self._process_events(dev, wait=True)  # c10: synchronize_and_free_events
                handle = dev.allocator.malloc(nbytes, stream=stream)
        except AllocatorOOM as e:
            # out-of-memory observers (torch._C._cuda_attach_out_of_memory_observer), called
            # as CUDACachingAllocator.cpp's malloc does: (device, size, total, free)
            for observer in list(self.oom_observers):
                observer(dev.index, int(e.alloc_size), int(e.capacity), int(e.free_device))
            where = user_frame()
            self.trace.oom(dev.index, int(e.requested), _user_code_frame())
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
                nbytes = cublas_workspace_bytes(dev.spec, self.cublas_workspace_override)
                handle = self._malloc(dev, nbytes)
                index = self.trace.alloc(
                    dev.index, nbytes, handle, self.clock(dev.index), "other", WORKSPACE, None
                )
                dev.cublas_workspace = (handle, index)
                self.notes["cuBLAS workspace allocated at the first matrix multiply"] += 1
                self._after_alloc(dev)

    def clear_cublas_workspaces(self) -> None:
        """``torch._C._cuda_clearCublasWorkspaces()``: free every device's cuBLAS workspace
        (the next GEMM allocates it again)."""
        with self._lock:
            for dev in self.devices:
                if dev.cublas_workspace is not None:
                    handle, index = dev.cublas_workspace
                    dev.allocator.free(handle)
                    self.trace.free(index, self.clock(dev.index), None)
                    dev.cublas_workspace = None
                dev.cublas_ready = False

    def short_of_host(self, what: str, nbytes: int, sizes: list[int], device: int) -> None:
        """``what`` (an operation) would take ``nbytes`` more host memory than the host has
        room for, to make new storages of ``sizes`` bytes on ``device``.

        As on the GPU, its out-of-memory error comes first: raised (at the user's line) if
        the outputs would not fit the simulated GPU. Otherwise, with ``values="auto"``, the
        run goes on with placeholder values (:meth:`switch_to_placeholders`) and the
        operation makes none; else :class:`HostMemoryError`.
        """
        with self._lock:
            dev = self.devices[device]
            handles: list[int] = []
            try:
                for n in sizes:
                    handles.append(self._malloc(dev, n))
            finally:
                for handle in handles:
                    dev.allocator.free(handle)
        self._out_of_host(f"{what} would take {_size(nbytes)} of host memory, {self._room_text()}")

    def _over_host_limit(self) -> None:
        assert self.host_limit is not None
        verb = "take" if self.real else "would take"
        self._out_of_host(
            f"real values {verb} {_size(self.host_bytes)} of host memory, over the limit "
            f"of {_size(self.host_limit)} ({self._limit_origin()})"
        )

    def _out_of_host(self, why: str) -> None:
        if self.scout is not None:  # placeholder values already: the scout decides
            self.scout.short_of_host(why)
            return
        if self.auto:
            self.switch_to_placeholders(why)
            return
        where = user_frame()
        at = f" at {where[0]}:{where[1]}" if where else ""
        self.note("stopped: real values would not fit in host memory")
        raise HostMemoryError(
            f"torchplace sim: the simulated GPUs' tensors hold real values in host memory, "
            f"and{at}: {why}. Run with --values auto (simulate(values='auto')) to go on with "
            "placeholder values from there, or --values placeholder to simulate shapes only "
            "from the start: any model size fits."
        )

    def _limit_origin(self) -> str:
        if self.host_limit_given:
            return "--host-memory-limit"
        return "half the memory available at the start; --host-memory-limit sets another"

    def _room_text(self) -> str:
        room = self.room
        if room is None:
            return "more than the host could allocate"
        parts = [f"real values hold {_size(self.host_bytes)}"]
        if self.host_limit is not None:
            parts.append(f"the limit is {_size(self.host_limit)} ({self._limit_origin()})")
        if room.available is not None:
            parts.append(
                f"the machine has {_size(room.available)} available now, of which "
                f"{_size(room.floor)} stays free"
            )
        return f"more than the {_size(max(room.left, 0))} left: " + "; ".join(parts)

    def switch_to_placeholders(self, reason: str) -> None:
        """Go on with placeholder values, in place, from the user's line running now.

        Tensors made from here on hold no values: their memory is allocated on the host and
        never written, so it is never resident (the dispatch mode computes their shapes with
        meta functions). Tensors made before keep theirs, but every value read back from
        here on is a placeholder. The backing stays the host, so tensors from before and
        after mix as before, autograd's graph included.
        """
        where = user_frame()
        self.real = self.counts_host = False
        self.switched = {
            "file": where[0] if where else None,
            "line": where[1] if where else None,
            "reason": reason,
        }
        at = f" from {where[0]}:{where[1]} on" if where else ""
        self.note(
            f"values: placeholder{at}, because {reason}; values read back from there are "
            "zeros (--values placeholder from the start; --values real stops instead)"
        )

    def host_weights(self, nbytes: int) -> None:
        """Count parameters moved from the host; past 1 GiB, say how to avoid it."""
        before = self.host_weight_bytes
        self.host_weight_bytes += nbytes
        if before < _GIB <= self.host_weight_bytes:
            self.note(
                "the script builds its weights on the host and then moves them to the GPU "
                "(model.cuda() / .to()): over 1 GiB so far, real host memory under simulation "
                "and a host copy on a GPU machine too; build them on the device instead: "
                "`with torch.device('cuda'): model = Model()` (or on 'meta', then "
                "model.to_empty(device='cuda') and load the weights)"
            )

    def check_host_room(self, nbytes: int) -> None:
        """Raise :class:`HostMemoryError` if making ``nbytes`` on the host would leave less
        than 1 GiB (or 5%) of its memory available."""
        available, total = host_memory()
        if available is None or total is None:
            return
        floor = max(_GIB, total // 20)
        if available - nbytes >= floor:
            return
        from torchplace._units import format_bytes

        where = user_frame()
        at = f" at {where[0]}:{where[1]}" if where else ""
        self.note("stopped: the host would run out of memory")
        raise HostMemoryError(
            f"torchplace sim: the script makes a {format_bytes(nbytes)} tensor on the host"
            f"{at}, and this machine has {format_bytes(available)} available: it would run "
            "out of memory. Scripts that build a model on the host and then call .cuda() "
            "need the whole model in host memory, here and on a GPU machine; build it on the "
            "device instead: `with torch.device('cuda'): model = Model()`."
        )

    def _died_with_stack(self, ref: _StorageRef) -> None:
        if self.stacks == "all":  # where the storage died: the free's traceback
            ref.stack = python_stack(2)
        self._pending_frees.append(ref)

    def record_use(self, storage: Any, stream: int) -> None:
        """``Tensor.record_stream``: the storage is used on ``stream`` too, so its block is
        not reused before the work enqueued there by its free is done (c10
        CUDACachingAllocator.cpp ``recordStream``: nothing to record on its own stream)."""
        with self._lock:
            rec = self.storages.get(storage._cdata)
            if rec is not None and stream != rec.stream:
                rec.uses = (rec.uses or set()) | {stream}

    def _process_events(self, dev: SimDevice, *, wait: bool = False) -> None:
        """Give back to the cache the pending blocks whose streams' work the host has seen
        done (c10 ``process_events``, at every malloc), or all of them (``wait``)."""
        kept = []
        for until, handle in dev.pending:
            if wait or self.streams.complete(dev.index, until):
                dev.allocator.release(handle)
            else:
                kept.append((until, handle))
        dev.pending = kept

    def _free_key(self, key: int, stack: Any = None) -> None:
        self._emptied.pop(key, None)
        rec = self.storages.pop(key, None)
        if rec is not None:
            dev = self.devices[rec.device]
            if rec.uses and self.streams is not None:
                until = max(self.streams.tail(dev.index, s) for s in rec.uses)
                dev.allocator.free(rec.handle, pending=True)
                dev.pending.append((until, rec.handle))
            else:
                dev.allocator.free(rec.handle)
            estimate = dev.estimate  # self.clock(device), inline
            time = estimate.seconds if estimate is not None else 0.0
            self.trace.free(rec.trace_index, time, self.kinds.pop(key, None), stack)
            if self.counts_host:
                self.host_bytes -= rec.nbytes

    def detach(self, key: int) -> None:
        """Forget storage ``key``'s block without freeing it: the allocator freed it already
        (torch/csrc/cuda/Module.cpp ``removeStorageDeleterFns``: a stale storage's deleter
        becomes ``deleteNothing``, so its death frees nothing)."""
        self._refs.pop(key, None)  # a dead weak reference calls back no one
        rec = self.storages.get(key)
        if rec is None:
            return
        dev = self.devices[rec.device]
        self.storages.pop(key)
        estimate = dev.estimate
        time = estimate.seconds if estimate is not None else 0.0
        self.trace.free(rec.trace_index, time, self.kinds.pop(key, None), None)
        if self.counts_host:
            self.host_bytes -= rec.nbytes

    def _drain(self) -> None:
        while self._pending_frees:
            ref = self._pending_frees.pop()
            self._refs.pop(ref.key, None)
            self._free_key(ref.key, getattr(ref, "stack", None))

    def sync(self) -> None:
        """Process frees that are pending (storage deaths are recorded asynchronously)."""
        with self._lock:
            self._drain()

    def empty_cache(self) -> None:
        with self._lock:
            self._drain()
            for dev in self.devices:
                dev.pending = []  # empty_cache releases them (synchronize_and_free_events)
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

    def refresh_kinds(self) -> None:
        """Classify the parameters, gradients and optimizer states the run knows of now."""
        with torch._C.DisableTorchFunction():  # the simulation's own reads, not the user's
            self._refresh_kinds()

    def _refresh_kinds(self) -> None:
        params = [p for m in list(self.modules) for p in m.parameters(recurse=False)]
        opts = list(self.optimizers)
        params += [p for opt in opts for group in opt.param_groups for p in group["params"]]
        self._classify(params, "parameters")
        self._classify([p.grad for p in params if p.grad is not None], "gradients")
        for m in list(self.modules):
            self._classify(_fsdp_unsharded(m), "unsharded_parameters")
        for opt in opts:
            self._classify_state(opt)

    def classify_state(self, optimizer: torch.optim.Optimizer) -> None:
        """Classify an optimizer's state (its first step makes it): after each step, where
        its parameters and gradients are classified already (before the step)."""
        with torch._C.DisableTorchFunction():
            self._classify_state(optimizer)

    def _classify_state(self, optimizer: torch.optim.Optimizer) -> None:
        states = [v for values in optimizer.state.values() for v in values.values()]
        self._classify(
            [v for v in states if isinstance(v, torch.Tensor) and v.dim() > 0], "optimizer_state"
        )

    def _snapshot(self, dev: SimDevice) -> None:
        dev.snapshot_at = dev.allocated
        self.refresh_kinds()
        breakdown = dict.fromkeys(CATEGORIES, 0)
        if dev.cublas_ready:
            breakdown["other"] += cublas_workspace_bytes(dev.spec, self.cublas_workspace_override)
        scopes: Counter[str] = Counter()
        for key, rec in list(self.storages.items()):
            if rec.device != dev.index:
                continue
            kind = self.kinds.get(key)
            if kind is None:
                kind = "activations" if rec.phase in ("forward", "backward") else "other"
                if kind == "activations":
                    scopes[rec.scope or "(backward)"] += rec.nbytes
            breakdown[kind] += rec.nbytes
        dev.peak_breakdown = breakdown
        dev.peak_scopes = dict(scopes.most_common(10))

    def finish_trace(self) -> None:
        """Give every allocation still live its category (the trace is then complete)."""
        self.sync()
        self.refresh_kinds()
        for key, rec in self.storages.items():
            self.trace.set_category(rec.trace_index, self.kinds.get(key))

    # --- events -------------------------------------------------------------------------
    def transfer(self, kind: str, nbytes: int, device: int | None = None) -> None:
        """Count a copy; host copies are also priced at the host link's speed."""
        if kind == "d2h" and self.scout is not None:
            self.scout.read()  # a value the script sees: the scout decides before it
        counts = self.transfers[kind]
        counts[0] += 1
        counts[1] += nbytes
        where = user_frame() or ("<unknown>", 0)
        site = self.transfer_sites.setdefault((kind, where[0], where[1]), [0, 0])
        site[0] += 1
        site[1] += nbytes
        index = self.current if device is None else device
        if kind != "d2d":
            host = self._host_seconds()
            self.trace.op(index, 0.0, nbytes, "h2d" if kind == "h2d" else "d2h", host=host)
            estimate = self.devices[index].estimate
            if self.peaks is not None and estimate is not None:
                seconds = transfer_seconds(nbytes, self.peaks, "h2d" if kind == "h2d" else "d2h")
                estimate.add(OpCost(f"copy {kind}", 0.0, nbytes, seconds, "memory", host=host))

    def collective(self, device: int, kind: str, size: int, world: int) -> None:
        """Price a collective over ``size`` bytes among ``world`` ranks (accounting/_comm.py)."""
        from torchplace.sim.accounting._comm import bus_bytes

        bus = bus_bytes(kind, size, world)
        dev = self.devices[device]
        link = float(
            dev.spec.gpu_link_bandwidth_bytes_per_s or dev.spec.host_bandwidth_bytes_per_s or 1e9
        )
        launch = self.peaks.launch_seconds if self.peaks is not None else 0.0
        seconds = self.topology.seconds(bus, world, link, launch)
        host = self._host_seconds()
        self.trace.op(
            device, 0.0, bus, "network" if self.topology.crosses_nodes(world) else "nvlink",
            host=host,
        )  # fmt: skip
        if dev.estimate is not None and bus > 0:
            dev.estimate.add(
                OpCost(f"nccl {kind}", 0.0, int(bus), seconds, "communication", host=host), None
            )

    def _host_seconds(self) -> float:
        """The host's seconds per operation under the peaks' time model (0 without one)."""
        timing = self.peaks.timing if self.peaks is not None else None
        return 0.0 if timing is None else timing.host_seconds

    def copy_waited(self, device: int) -> None:
        """A blocking host-to-device copy returned: ``memcpy_and_sync`` (c10/cuda/
        CUDAFunctions.h, called by Copy.cu's copy_kernel_cuda without non_blocking) waits
        for the stream, so the device's work enqueued so far is done as the host sees it.
        Counted as a transfer, not a sync."""
        dev = self.devices[device]
        if dev.estimate is not None and dev.done < dev.estimate.seconds:
            dev.done = dev.estimate.seconds

    def record_sync(self, kind: str, *, device: int | None = None) -> None:
        """Count a host wait at the user's line; without ``device`` (the caller says how far
        it waited) the host has waited for all the work enqueued so far."""
        if self.capture is not None:
            self.capture.refuse(kind)  # a host wait cannot be part of a CUDA graph
        where = user_frame() or ("<unknown>", 0)
        self.syncs[(kind, where[0], where[1])] += 1
        if device is None:
            for dev in self.devices:
                if dev.estimate is not None and dev.done < dev.estimate.seconds:
                    dev.done = dev.estimate.seconds
        if self.devices:  # the host waits for the GPU (the time model's queue)
            index = self.current if device is None else device
            dev = self.devices[index]
            if dev.estimate is not None:
                dev.estimate.sync(None if device is None else dev.done)
            self.trace.op(index, 0.0, 0.0, "sync")

    def note(self, text: str) -> None:
        self.notes[text] += 1
