"""``torch.cuda`` and ``torch.accelerator`` as the simulated GPUs would answer them.

Inside a simulation these module attributes are replaced (and restored afterwards), so a
script's ``torch.cuda.is_available()``, ``get_device_properties()``, ``mem_get_info()``,
``memory_allocated()`` and friends describe the simulated devices. Pinning host memory
needs a driver, so ``Tensor.pin_memory`` marks the tensor instead (the DataLoader's pin
thread runs outside the torch modes, hence a class-level patch).
"""

from __future__ import annotations

import contextlib
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from torchplace.sim._modes import SimFunctionMode, invalid_ordinal
from torchplace.sim._state import SimState

__all__ = ["SimDeviceProperties", "patched_torch"]


@dataclass(frozen=True)
class SimDeviceProperties:
    """What ``torch.cuda.get_device_properties`` returns for a simulated GPU."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    warp_size: int = 32

    def __repr__(self) -> str:
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // 1024**2}MB, "
            f"multi_processor_count={self.multi_processor_count}) [simulated]"
        )


class _Stream:
    """A stand-in for ``torch.cuda.Stream``: work on a simulated GPU is never pending."""

    def __init__(self, device: Any = None, priority: int = 0, **_: Any) -> None:
        self.device = device
        self.priority = priority

    def synchronize(self) -> None: ...
    def wait_stream(self, stream: Any) -> None: ...
    def wait_event(self, event: Any) -> None: ...
    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        return False

    def record_event(self, event: Any = None) -> Any:
        return event or _Event()

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None: ...


class _Event:
    """A stand-in for ``torch.cuda.Event``; ``elapsed_time`` is 0 (nothing really runs)."""

    def __init__(self, enable_timing: bool = False, **_: Any) -> None:
        self.enable_timing = enable_timing

    def record(self, stream: Any = None) -> None: ...
    def wait(self, stream: Any = None) -> None: ...
    def query(self) -> bool:
        return True

    def synchronize(self) -> None: ...
    def elapsed_time(self, end_event: Any) -> float:
        return 0.0


def _api(state: SimState, fmode: SimFunctionMode) -> dict[str, Callable[..., Any]]:
    n = len(state.devices)

    def index(device: Any = None) -> int:
        if device is None:
            return state.current
        if isinstance(device, int):
            i = device
        else:
            dev = torch.device(device)
            if dev.type != "cuda":
                raise ValueError(f"Expected a cuda device, but got: {dev}")
            i = state.current if dev.index is None else dev.index
        if not 0 <= i < n:
            raise invalid_ordinal(i, n)
        return i

    def set_device(device: Any) -> None:
        state.current = index(device)

    def properties(device: Any = None) -> SimDeviceProperties:
        d = state.devices[index(device)]
        major, minor = d.spec.compute_capability or (0, 0)
        return SimDeviceProperties(
            d.spec.torch_name, major, minor, d.capacity, d.spec.multiprocessor_count
        )

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        state.sync()
        d = state.devices[index(device)]
        return d.allocator.device_free_bytes, d.capacity

    def stat(name: str) -> Callable[..., int]:
        def query(device: Any = None) -> int:
            state.sync()
            return int(getattr(state.devices[index(device)].allocator, name))

        return query

    def memory_stats(device: Any = None) -> dict[str, int]:
        state.sync()
        return state.devices[index(device)].allocator.stats()

    def reset_peak(device: Any = None) -> None:
        state.sync()
        state.devices[index(device)].allocator.reset_peak_stats()

    def synchronize(device: Any = None) -> None:
        index(device)
        state.record_sync("synchronize")

    def bf16(including_emulation: bool = True) -> bool:
        return bool(state.devices[state.current].spec.bf16)

    def capability(device: Any = None) -> tuple[int, int]:
        return state.devices[index(device)].spec.compute_capability or (0, 0)

    class device_ctx:
        def __init__(self, device: Any) -> None:
            self.idx = -1 if device is None or device == -1 else index(device)
            self.prev = state.current

        def __enter__(self) -> None:
            if self.idx >= 0:
                self.prev, state.current = state.current, self.idx

        def __exit__(self, *exc: object) -> None:
            if self.idx >= 0:
                state.current = self.prev

    def rng_state(device: Any = None) -> torch.Tensor:
        return torch.zeros(16, dtype=torch.uint8)

    def noop(*args: Any, **kwargs: Any) -> None:
        return None

    return {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "init": noop,
        "device_count": lambda: n,
        "current_device": lambda: state.current,
        "set_device": set_device,
        "get_device_name": lambda device=None: state.devices[index(device)].spec.torch_name,
        "get_device_properties": properties,
        "get_device_capability": capability,
        "mem_get_info": mem_get_info,
        "memory_allocated": stat("allocated_bytes"),
        "max_memory_allocated": stat("peak_allocated_bytes"),
        "memory_reserved": stat("reserved_bytes"),
        "max_memory_reserved": stat("peak_reserved_bytes"),
        "memory_stats": memory_stats,
        "reset_peak_memory_stats": reset_peak,
        "reset_max_memory_allocated": reset_peak,
        "empty_cache": lambda: state.empty_cache(),
        "synchronize": synchronize,
        "is_bf16_supported": bf16,
        "manual_seed": noop,
        "manual_seed_all": noop,
        "seed": noop,
        "seed_all": noop,
        "get_rng_state": rng_state,
        "get_rng_state_all": lambda: [rng_state() for _ in range(n)],
        "set_rng_state": noop,
        "set_rng_state_all": noop,
        "device": device_ctx,
        "Stream": _Stream,
        "Event": _Event,
        "current_stream": lambda device=None: _Stream(device),
        "default_stream": lambda device=None: _Stream(device),
        "stream": lambda stream=None: contextlib.nullcontext(),
        "is_current_stream_capturing": lambda: False,
    }


def _accelerator_api(state: SimState, cuda: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    return {
        "is_available": lambda check_fork=False: True,
        "device_count": cuda["device_count"],
        "current_accelerator": lambda check_available=False: torch.device("cuda"),
        "current_device_index": cuda["current_device"],
        "current_device_idx": cuda["current_device"],
        "set_device_index": cuda["set_device"],
        "set_device_idx": cuda["set_device"],
        "synchronize": cuda["synchronize"],
        "current_stream": cuda["current_stream"],
    }


def _compile(model: Any = None, **kwargs: Any) -> Any:
    warnings.warn(
        "torchplace sim: torch.compile is not simulated; the model runs eagerly (the memory "
        "and time of compiled kernels differ, usually lower).",
        stacklevel=2,
    )
    if model is None:
        return lambda m: m
    return model


@contextlib.contextmanager
def patched_torch(state: SimState, fmode: SimFunctionMode) -> Iterator[None]:
    """Replace the CUDA-facing parts of torch for the duration of a simulation."""
    cuda_api = _api(state, fmode)
    patches: list[tuple[Any, str, Any]] = [(torch.cuda, k, v) for k, v in cuda_api.items()]
    accel = getattr(torch, "accelerator", None)
    if isinstance(accel, types.ModuleType):
        patches += [
            (accel, k, v) for k, v in _accelerator_api(state, cuda_api).items() if hasattr(accel, k)
        ]
    pinned: weakref.WeakSet[torch.Tensor] = weakref.WeakSet()
    real_is_pinned = torch.Tensor.is_pinned

    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        pinned.add(self)
        return self

    def is_pinned(self: torch.Tensor, device: Any = None) -> bool:
        return self in pinned or (not self.is_meta and bool(real_is_pinned(self)))

    patches += [
        (torch.Tensor, "pin_memory", pin_memory),
        (torch.Tensor, "is_pinned", is_pinned),
        (torch.Tensor, "record_stream", lambda self, stream: None),
        (torch, "compile", _compile),
    ]
    saved = [(obj, name, getattr(obj, name, None)) for obj, name, _ in patches]
    swap = torch.__future__.get_swap_module_params_on_conversion()
    try:
        for obj, name, value in patches:
            setattr(obj, name, value)
        # Parameters keep their identity when a module moves to a simulated device, as they
        # do on CUDA (meta and CPU tensors are not shallow-copy compatible, so swap them).
        torch.__future__.set_swap_module_params_on_conversion(True)
        yield
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)
        for obj, name, value in reversed(saved):
            if value is None:
                delattr(obj, name)
            else:
                setattr(obj, name, value)
