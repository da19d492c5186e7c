"""CUDA streams and events of simulated GPUs, as torch's bindings define them.

What ``torch/cuda/streams.py`` builds its ``Stream`` and ``Event`` on, emulated:
``torch._C._CudaStreamBase`` and ``torch._C._CudaEventBase`` (torch/csrc/cuda/Stream.cpp,
Event.cpp), and the generic ``torch.Stream`` / ``torch.Event`` for ``device="cuda"``
(torch/csrc/Stream.cpp, Event.cpp), whose C++ would call the CUDA driver. Each emulated
class subclasses torch's own generic class, so ``isinstance(s, torch.Stream)`` holds as on
CUDA, and keeps torch's identity rules: a stream is its (device, stream id) as in
c10/cuda/CUDAStream.cpp (id 0 is the default stream; pool streams are handed out round
robin, 32 per priority level; ``priority_range()`` is (0, -3):
``max_compile_time_stream_priorities`` is 4 in c10/cuda/CUDAStream.h).

When work is done is answered by :class:`Timeline`: each device runs the work enqueued on
it (the cost model's clock, in seconds of GPU time) beside the host, starting as soon as
it is enqueued and taking the time the cost model gives it; the host sees it complete
after that much wall time has passed, or at once where it waits (``synchronize()``,
``.item()``, a copy to the host). So ``torch.cuda._sleep(n)`` keeps a stream busy for
``n`` GPU clock cycles, ``query()`` is False until then, and ``Event.elapsed_time`` is
the GPU time between two records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import torch

from torchplace.cost import OpCost
from torchplace.sim.accounting._state import SimState

__all__ = ["CUDA_TYPE", "Timeline", "invalid_ordinal", "stream_classes"]

CUDA_TYPE = 1  # c10::DeviceType::CUDA
_STREAMS_PER_POOL = 32  # kStreamsPerPool, c10/cuda/CUDAStream.cpp
_PRIORITY_LEVELS = 4  # max_compile_time_stream_priorities, c10/cuda/CUDAStream.h
# Simulated cudaStream_t / cudaEvent_t handles: nonzero, address-like, never dereferenced.
_HANDLE_BASE = 0x7F1E_0000_0000
# c10::EventFlag (c10/core/Event.h): what torch.Event's repr prints as event_flag
_PYTORCH_DEFAULT, _BACKEND_DEFAULT = 0, 1


def invalid_ordinal(index: int, count: int) -> RuntimeError:
    """CUDA's error for a device ordinal that does not exist."""
    err = getattr(torch, "AcceleratorError", RuntimeError)
    return err(
        "CUDA error: invalid device ordinal\n"
        f"(simulated: cuda:{index} requested but {count} simulated GPU(s) exist; "
        "simulate more: --gpus N with torchplace sim, --sim-gpus N with pytest, gpus=N in "
        "simulate())"
    )


def _native_id(priority_index: int, index: int) -> int:
    """A pool stream's id (c10/cuda/CUDAStream.cpp makeStreamId: the index in the pool, the
    priority level, and a low bit that marks native streams)."""
    return (index << 5) | (priority_index << 1) | 1


def tag_backward_stream(out: Any, device: int) -> None:
    """Make the backward of the operation that made ``out`` run on the stream the operation
    ran on, as the autograd engine does ("Stream semantics of backward passes", the CUDA
    semantics notes): hooks on its grad_fn make that stream current while it runs."""
    t = out[0] if isinstance(out, (tuple, list)) and out else out
    node = getattr(t, "grad_fn", None) if isinstance(t, torch.Tensor) else None
    if node is None:
        return
    metadata = node.metadata  # kept by the C++ node (its Python object is not)
    if "torchplace_stream" in metadata:
        return
    stream = metadata["torchplace_stream"] = torch.cuda.current_stream(device)
    saved: list[tuple[int, Any]] = []

    # torch/csrc/autograd/engine.cpp runs a node under a c10::OptionalStreamGuard, which, as
    # every StreamGuard, makes the stream's device current too and on exit gives back both
    # the stream and the device that were current (c10/core/StreamGuard.h)
    def before(*args: Any) -> None:
        saved.append((torch.cuda.current_device(), torch.cuda.current_stream(device)))
        torch.cuda.set_stream(stream)

    def after(*args: Any) -> None:
        if saved:
            previous_device, previous_stream = saved.pop()
            torch.cuda.set_stream(previous_stream)
            torch.cuda.set_device(previous_device)

    node.register_prehook(before)
    node.register_hook(after)


class Timeline:
    """When work on each simulated device is done, as the host sees it (module docstring)."""

    def __init__(self, state: SimState) -> None:
        self.state = state
        self._local = threading.local()  # this thread's current stream per device
        self._tails: dict[tuple[int, int], float] = {}  # (device, stream) -> its last work
        self._counters: dict[tuple[int, int], int] = {}  # (device, priority) -> next in pool
        self._next_handle = 1
        self._lock = threading.Lock()
        #: (device, stream) -> the work of other devices it waits for, as (device, GPU
        #: time): each device keeps its own clock, so a cross-device cudaStreamWaitEvent is
        #: a dependency (the stream's later work, and events recorded after, complete only
        #: once that work has: CUDA runtime API, cudaStreamWaitEvent)
        self._deps: dict[tuple[int, int], frozenset[tuple[int, float]]] = {}

    # --- current streams (thread-local in c10, as here) ---------------------------------
    def _currents(self) -> dict[int, tuple[int, float]]:
        currents: dict[int, tuple[int, float]] | None = getattr(self._local, "currents", None)
        if currents is None:
            currents = self._local.currents = {}
        return currents

    def current(self, device: int) -> int:
        """The id of ``device``'s current stream on this thread (0: the default stream)."""
        return self._currents().get(device, (0, 0.0))[0]

    def set_current(self, device: int, stream_id: int) -> None:
        currents = self._currents()
        old, since = currents.get(device, (0, 0.0))
        now = self.state.clock(device)
        if now > since:  # the work enqueued while `old` was current went to `old`
            self._tails[(device, old)] = now
        currents[device] = (stream_id, now)
        if stream_id:
            self.state.side_streams = True  # backward passes follow streams from now on

    def tail(self, device: int, stream_id: int) -> float:
        """The GPU time at which the last work enqueued on a stream ends."""
        current, since = self._currents().get(device, (0, 0.0))
        if stream_id == current:
            now = self.state.clock(device)
            if now > since:
                return now
        return self._tails.get((device, stream_id), 0.0)

    def wait_until(self, device: int, stream_id: int, until: float) -> None:
        """A stream waits for work that ends at ``until`` (``wait_event``)."""
        key = (device, stream_id)
        if until > self._tails.get(key, 0.0) and until > self.tail(device, stream_id):
            self._tails[key] = until

    def wait_for(self, device: int, stream_id: int, points: Iterable[tuple[int, float]]) -> None:
        """A stream waits for work ending at each ``(device, GPU time)`` of ``points``."""
        cross = frozenset(p for p in points if p[0] != device)
        for d, until in points:
            if d == device:
                self.wait_until(device, stream_id, until)
        if cross:
            key = (device, stream_id)
            self._deps[key] = self._deps.get(key, frozenset()) | cross

    def deps(self, device: int, stream_id: int | None = None) -> frozenset[tuple[int, float]]:
        """What a stream (every stream of ``device`` when None) waits for on other devices."""
        if stream_id is not None:
            return self._deps.get((device, stream_id), frozenset())
        return frozenset(p for (d, _), ps in self._deps.items() if d == device for p in ps)

    def settled(self, deps: Iterable[tuple[int, float]]) -> bool:
        return all(self.complete(d, until) for d, until in deps)

    def settle(self, deps: Iterable[tuple[int, float]]) -> None:
        """The host's wait reached work other devices had to finish first."""
        for d, until in deps:
            dev = self.state.devices[d]
            self.progress(d)
            dev.done = max(dev.done, until)

    def pool_stream(self, device: int, priority: int) -> tuple[int, int]:
        """The next (stream id, priority) of ``device``'s pool for ``priority``
        (getStreamFromPool: priorities clamp to [-3, 0], streams are reused round robin)."""
        level = min(max(-priority, 0), _PRIORITY_LEVELS - 1)
        with self._lock:
            index = self._counters.get((device, level), 0)
            self._counters[(device, level)] = index + 1
        return _native_id(level, index % _STREAMS_PER_POOL), -level

    def new_handle(self) -> int:
        with self._lock:
            self._next_handle += 1
            return _HANDLE_BASE + 0x1000_0000 + self._next_handle * 0x40

    # --- completion ---------------------------------------------------------------------
    def progress(self, device: int) -> float:
        """GPU time up to which ``device`` has finished its work, as of now: it has run
        since the host last looked, for as much GPU time as wall time has passed."""
        dev = self.state.devices[device]
        now = time.perf_counter()
        clock = self.state.clock(device)
        if dev.done < clock:
            dev.done = min(clock, dev.done + max(now - dev.done_wall, 0.0))
        dev.done_wall = now
        return dev.done

    def complete(self, device: int, until: float) -> bool:
        return until <= self.progress(device)

    def wait(self, device: int, until: float, kind: str) -> None:
        """The host waits for ``device``'s work up to GPU time ``until``."""
        dev = self.state.devices[device]
        self.progress(device)
        dev.done = max(dev.done, until)
        self.state.record_sync(kind, device=device)

    def sleep(self, device: int, cycles: int) -> None:
        """``torch.cuda._sleep``: a kernel that spins ``cycles`` GPU clock cycles."""
        self.progress(device)  # what ran before; the spin starts now
        seconds = max(int(cycles), 0) / (device_clock_khz(self.state, device) * 1e3)
        estimate = self.state.devices[device].estimate
        if estimate is not None:
            estimate.add(OpCost("cuda._sleep", 0.0, 0, seconds, "launch"), None)
        self.state.trace.op(device, 0.0, 0, "fp32")


def device_clock_khz(state: SimState, device: int) -> int:
    """The SM clock in kHz (``clockRate``, torch's ``clock_rate``): the fp32 peak divided by
    the fp32 lanes of all SMs (two FLOPs per fused multiply-add). Lanes per SM: 64 on
    compute capability 7.x and 8.0, 128 on the others (CUDA C++ Programming Guide,
    "Arithmetic Instructions" throughput table); 128 per CDNA compute unit. H100 SXM:
    67 TFLOP/s / (132 x 128 x 2) = 1.98 GHz, its boost clock."""
    spec = state.devices[device].spec
    cc = spec.compute_capability
    lanes = 64 if cc is not None and (cc[0] == 7 or cc == (8, 0)) else 128
    fp32 = spec.peak_flops.get("fp32") or 0.0
    sms = spec.multiprocessor_count or 1
    return max(int(fp32 / (sms * lanes * 2) / 1e3), 1) if fp32 else 1_500_000


def stream_classes(state: SimState, timeline: Timeline) -> dict[str, type]:
    """The emulated classes: ``Stream``, ``Event`` (for ``torch``), ``_CudaStreamBase`` and
    ``_CudaEventBase`` (for ``torch._C``)."""
    RealStream: Any = torch._C.Stream
    RealEvent: Any = torch._C.Event

    def index(device: Any) -> int:
        if device is None:
            return state.current
        if isinstance(device, int):
            return device
        dev = torch.device(device)
        return state.current if dev.index is None else dev.index

    def check(device: int) -> None:
        state.init_cuda()
        if not 0 <= device < len(state.devices):
            raise invalid_ordinal(device, len(state.devices))

    def make(cls: type, stream_id: int, device: int, device_type: int = CUDA_TYPE) -> Any:
        return RealStream.__new__(
            cls, stream_id=stream_id, device_index=device, device_type=device_type
        )

    def cuda_handle(device: int, stream_id: int) -> int:
        if stream_id == 0:
            return 0  # the default (legacy) stream is cudaStream_t 0
        if not stream_id & 1:
            return stream_id  # an external stream: its id is its pointer
        return _HANDLE_BASE + (device << 24) + stream_id * 0x10

    class Stream(RealStream):
        """torch.Stream (torch/csrc/Stream.cpp): on ``cuda``, a simulated GPU's stream."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            priority = int(kwargs.pop("priority", 0))
            if len(args) + len(kwargs) >= 3 or "stream_id" in kwargs:
                names = ("stream_id", "device_index", "device_type")
                given = dict(zip(names, args, strict=False)) | kwargs
                device_type = int(given.get("device_type", 0))
                obj = RealStream.__new__(
                    cls, stream_id=int(given.get("stream_id", -1)),
                    device_index=int(given.get("device_index", 0)), device_type=device_type,
                )  # fmt: skip
                obj._priority = priority
                return obj
            device = args[0] if args else kwargs.pop("device", None)
            if kwargs:
                raise TypeError(
                    f"Stream() got an unexpected keyword argument {next(iter(kwargs))!r}"
                )
            dev = torch.device("cuda") if device is None else _as_device(device)
            if dev.type != "cuda":
                real = RealStream(dev, priority=priority)
                obj = make(cls, real.stream_id, real.device_index, real.device_type)
                obj._priority = priority
                return obj
            d = index(dev)
            check(d)
            stream_id, actual = timeline.pool_stream(d, priority)
            obj = make(cls, stream_id, d)
            obj._priority = actual
            return obj

        def _is_cuda(self) -> bool:
            return int(self.device_type) == CUDA_TYPE

        def query(self) -> bool:
            if not self._is_cuda():
                return bool(RealStream.query(self))
            d, sid = self.device_index, self.stream_id
            return timeline.complete(d, timeline.tail(d, sid)) and timeline.settled(
                timeline.deps(d, sid)
            )

        def synchronize(self) -> None:
            if not self._is_cuda():
                return RealStream.synchronize(self)
            d = self.device_index
            timeline.wait(d, timeline.tail(d, self.stream_id), "stream.synchronize")
            timeline.settle(timeline.deps(d, self.stream_id))
            return None

        def wait_event(self, event: Any) -> None:
            if not self._is_cuda():
                return RealStream.wait_event(self, event)
            recorded = getattr(event, "_recorded", None)
            if recorded is not None:
                points = {recorded, *getattr(event, "_deps", ())}
                timeline.wait_for(self.device_index, self.stream_id, points)
            return None

        def wait_stream(self, stream: Any) -> None:
            if not self._is_cuda():
                return RealStream.wait_stream(self, stream)
            d, sid = stream.device_index, stream.stream_id
            points = {(d, timeline.tail(d, sid)), *timeline.deps(d, sid)}
            timeline.wait_for(self.device_index, self.stream_id, points)
            return None

        def record_event(self, event: Any = None) -> Any:
            if not self._is_cuda():
                return RealStream.record_event(self, event)
            if event is None:
                event = Event(self.device)
            event.record(self)
            return event

        def is_capturing(self) -> bool:
            capturing = getattr(state, "capturing", None)
            return bool(capturing and capturing(self.device_index, self.stream_id))

        @property
        def native_handle(self) -> int:
            if not self._is_cuda():
                return int(RealStream.native_handle.__get__(self))
            return cuda_handle(self.device_index, self.stream_id)

        def __enter__(self) -> Any:
            # THPStream_enter: switch to the stream's device, make it current there; the
            # previous device and stream are restored by __exit__ (a stack: re-entrant)
            if not self._is_cuda():
                return RealStream.__enter__(self)
            d = self.device_index
            previous = (state.current, timeline.current(d))
            if d != state.current:
                torch.cuda.set_device(d)
            timeline.set_current(d, self.stream_id)
            self.__dict__.setdefault("_contexts", []).append(previous)
            return self

        def __exit__(self, *exc: object) -> None:
            if not self._is_cuda():
                return RealStream.__exit__(self, *exc)
            device, stream_id = self.__dict__["_contexts"].pop()
            timeline.set_current(self.device_index, stream_id)
            torch.cuda.set_device(device)
            return None

    class _CudaStreamBase(Stream):
        """torch._C._CudaStreamBase (torch/csrc/cuda/Stream.cpp THCPStream_pynew)."""

        def __new__(
            cls,
            priority: int = 0,
            stream_id: int = 0,
            device_index: int = 0,
            device_type: int = 0,
            stream_ptr: int = 0,
        ) -> Any:
            state.init_cuda()
            if stream_ptr and priority != 0:
                raise RuntimeError("Priority was explicitly set for a external stream")
            if stream_id or device_index or device_type:
                obj = make(cls, stream_id, device_index, device_type)
                obj._priority = 0 if not stream_id & 1 else -((stream_id >> 1) & 0xF)
                return obj
            d = state.current
            check(d)
            if stream_ptr:
                obj = make(cls, int(stream_ptr), d)
                obj._priority = 0
                return obj
            new_id, actual = timeline.pool_stream(d, int(priority))
            obj = make(cls, new_id, d)
            obj._priority = actual
            return obj

        @property
        def cuda_stream(self) -> int:
            return cuda_handle(self.device_index, self.stream_id)

        @property
        def priority(self) -> int:
            return int(getattr(self, "_priority", 0))

        @staticmethod
        def priority_range() -> tuple[int, int]:
            return (0, -(_PRIORITY_LEVELS - 1))

        def __eq__(self, other: object) -> bool:
            return isinstance(other, RealStream) and (
                other.device_index,
                other.stream_id,
                other.device_type,
            ) == (self.device_index, self.stream_id, self.device_type)

        def __hash__(self) -> int:
            return hash((self.device_type, self.stream_id, self.device_index))

    class Event(RealEvent):
        """torch.Event (torch/csrc/Event.cpp): on ``cuda``, a simulated GPU's event."""

        _real: bool
        _timing: bool
        _flags: tuple[bool, bool, bool]
        _recorded: tuple[int, float] | None  # (device, GPU time) of the last record
        _handle: int

        def __new__(cls, device: Any = None, **kwargs: Any) -> Any:
            dev = torch.device("cuda") if device is None else _as_device(device)
            if dev.type != "cuda":  # torch's own event of that device
                obj = RealEvent.__new__(cls, dev, **kwargs)
                obj._real = True
                return obj
            return cls._init(RealEvent.__new__(cls, "cpu"), **kwargs)

        @classmethod
        def _init(
            cls,
            obj: Any,
            enable_timing: bool = False,
            blocking: bool = False,
            interprocess: bool = False,
            external: bool = False,
        ) -> Any:
            obj._real = False
            obj._timing = bool(enable_timing)
            obj._flags = (bool(blocking), bool(interprocess), bool(external))
            obj._recorded = None  # (device, GPU time) of the last record
            obj._deps = frozenset()  # what its stream waited for on other devices then
            obj._handle = 0
            return obj

        def record(self, stream: Any = None) -> None:
            if self._real:
                return RealEvent.record(self, stream)
            if stream is None:
                stream = torch.cuda.current_stream()
            d = int(stream.device_index)
            if self._recorded is not None and self._recorded[0] != d:
                raise RuntimeError(
                    f"Event device {self._recorded[0]} does not match recording stream's "
                    f"device {d}."
                )
            if not self._handle:
                self._handle = timeline.new_handle()
            sid = int(stream.stream_id)
            capture = state.capture
            if capture is not None and state.capturing(d, sid):  # type: ignore[attr-defined]
                # a node of the graph: recorded when a replay gets there (an external
                # event only then; another one also now, for the capture's own waits)
                capture.add_marker(  # on the stream the graph is replayed on
                    lambda: setattr(self, "_recorded", (d, timeline.tail(d, timeline.current(d))))
                )
                if self._flags[2]:
                    return None
            self._recorded = (d, timeline.tail(d, sid))
            self._deps = timeline.deps(d, sid)
            return None

        def wait(self, stream: Any = None) -> None:
            if self._real:
                return RealEvent.wait(self, stream)
            if stream is None:
                stream = torch.cuda.current_stream()
            if self._recorded is not None:
                points = {self._recorded, *self._deps}
                timeline.wait_for(int(stream.device_index), int(stream.stream_id), points)
            return None

        def query(self) -> bool:
            if self._real:
                return bool(RealEvent.query(self))
            if self._recorded is None:
                return True
            return timeline.complete(*self._recorded) and timeline.settled(self._deps)

        def synchronize(self) -> None:
            if self._real:
                return RealEvent.synchronize(self)
            if self._recorded is not None:
                timeline.wait(*self._recorded, "event.synchronize")
                timeline.settle(self._deps)
            return None

        def elapsed_time(self, end_event: Any) -> float:
            if self._real:
                return float(RealEvent.elapsed_time(self, end_event))
            # c10/cuda/CUDAEvent.h elapsed_time: TORCH_CHECK_VALUE, TORCH_CHECK_VALUE,
            # TORCH_CHECK, in this order
            if not (self._timing and getattr(end_event, "_timing", False)):
                raise ValueError("Both events must be created with argument 'enable_timing=True'.")
            if self._recorded is None or end_event._recorded is None:
                raise ValueError("Both events must be recorded before calculating elapsed time.")
            if not (self.query() and end_event.query()):
                raise RuntimeError("Both events must be completed before calculating elapsed time.")
            if self._recorded[0] != end_event._recorded[0]:
                # then cudaEventElapsedTime, which refuses events of two devices (CUDA runtime
                # API: cudaErrorInvalidResourceHandle), raised by C10_CUDA_CHECK
                err = getattr(torch, "AcceleratorError", RuntimeError)
                raise err("CUDA error: invalid resource handle\n")
            return (end_event._recorded[1] - self._recorded[1]) * 1e3

        def ipc_handle(self) -> Any:
            if self._real:
                return RealEvent.ipc_handle(self)
            raise RuntimeError(
                "not simulated: CUDA IPC event handles (Event.ipc_handle): simulated GPUs "
                "share no memory between processes."
            )

        @classmethod
        def from_ipc_handle(cls, device: Any, handle: Any) -> Any:
            raise RuntimeError(
                "not simulated: CUDA IPC event handles (Event.from_ipc_handle): simulated "
                "GPUs share no memory between processes."
            )

        @property
        def device(self) -> torch.device | None:
            if self._real:
                return RealEvent.device.__get__(self)
            return None if self._recorded is None else torch.device("cuda", self._recorded[0])

        @property
        def event_id(self) -> int:
            if self._real:
                return int(RealEvent.event_id.__get__(self))
            return int(self._handle)

        def __repr__(self) -> str:
            if self._real:
                return str(RealEvent.__repr__(self))
            d = -1 if self._recorded is None else self._recorded[0]
            flag = _BACKEND_DEFAULT if self._timing else _PYTORCH_DEFAULT
            return (
                f"torch.Event device_type=cuda, device_index={d}, event_flag={flag}, "
                f"event_id={self._handle}"
            )

    class _CudaEventBase(Event):
        """torch._C._CudaEventBase (torch/csrc/cuda/Event.cpp THCPEvent_pynew)."""

        def __new__(
            cls,
            enable_timing: bool = False,
            blocking: bool = False,
            interprocess: bool = False,
            external: bool = False,
        ) -> Any:
            return cls._init(
                RealEvent.__new__(cls, "cpu"), enable_timing, blocking, interprocess, external
            )

        @property
        def cuda_event(self) -> int:
            return int(self._handle)

    for cls, module, name in (
        (Stream, "torch", "Stream"),
        (Event, "torch", "Event"),
        (_CudaStreamBase, "torch._C", "_CudaStreamBase"),
        (_CudaEventBase, "torch._C", "_CudaEventBase"),
    ):
        cls.__module__, cls.__name__, cls.__qualname__ = module, name, name
    return {
        "Stream": Stream,
        "Event": Event,
        "_CudaStreamBase": _CudaStreamBase,
        "_CudaEventBase": _CudaEventBase,
    }


def _as_device(device: Any) -> torch.device:
    if isinstance(device, int) and not isinstance(device, bool):
        return torch.device("cuda", device)
    return torch.device(device)
