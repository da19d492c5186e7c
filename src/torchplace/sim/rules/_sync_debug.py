"""``torch.cuda.set_sync_debug_mode`` on simulated GPUs.

On CUDA, ``torch.cuda.set_sync_debug_mode("warn" | "error")`` (torch/cuda/__init__.py) calls
``torch._C._cuda_set_sync_debug_mode`` (torch/csrc/cuda/Module.cpp), which stores the mode in
c10's ``warning_state()``; every ``c10::cuda::memcpy_and_sync`` and ``stream_synchronize``
(c10/cuda/CUDAFunctions.h) then calls ``warn_or_error_on_sync`` first: a UserWarning, or a
RuntimeError, "called a synchronizing CUDA operation". Those two functions are what blocking
copies between host and device (both directions: aten/src/ATen/native/cuda/Copy.cu),
``.item()`` (_local_scalar_dense), data-dependent shapes (nonzero, through a blocking copy)
and ``Stream.synchronize()`` run on. ``torch.cuda.synchronize()``
(``device_synchronize``: cudaDeviceSynchronize) and ``Event.synchronize()``
(cudaEventSynchronize) do not check.

The simulation records each sync with its site (the report counts them); here the ones
CUDA checks raise or warn as CUDA does, and so does a blocking host-to-device copy, which
the report counts as a transfer, not a sync.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from torchplace.sim.rules._sdpa import warn

if TYPE_CHECKING:
    from torchplace.sim.accounting._state import SimState

__all__ = ["bindings", "check", "installed"]

_MESSAGE = "called a synchronizing CUDA operation"
#: syncs the simulation records that CUDA's code does not check (CUDAFunctions.cpp
#: device_synchronize; cudaEventSynchronize in torch/csrc/cuda/Event.cpp's CUDAEvent)
_UNCHECKED = frozenset(("synchronize", "event.synchronize"))
_mode = [0]  # c10::cuda::SyncDebugMode: 0 disabled, 1 warn, 2 error
_prototype_warned = [False]


def check() -> None:
    """c10/cuda/CUDAFunctions.cpp warn_or_error_on_sync."""
    if _mode[0] == 2:
        raise RuntimeError(_MESSAGE)
    if _mode[0] == 1:
        warn(_MESSAGE)


def _set(debug_mode: Any) -> None:
    """torch/csrc/cuda/Module.cpp THCPModule_cudaSetSyncDebugMode."""
    if not _prototype_warned[0]:  # TORCH_WARN_ONCE
        _prototype_warned[0] = True
        warn(
            "Synchronization debug mode is a prototype feature and does not yet detect all "
            "synchronizing operations"
        )
    if not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise RuntimeError("invalid argument to set_sync_debug_mode")
    if not 0 <= debug_mode <= 2:
        raise RuntimeError("invalid value of debug_mode, expected one of 0,1,2")
    _mode[0] = debug_mode


def bindings() -> dict[str, Callable[..., Any]]:
    """The ``torch._C`` bindings torch.cuda's Python calls."""
    return {"_cuda_set_sync_debug_mode": _set, "_cuda_get_sync_debug_mode": lambda: _mode[0]}


@contextlib.contextmanager
def installed(state: SimState) -> Iterator[None]:
    """The mode starts disabled (a new process); the syncs CUDA checks are checked."""
    record = state.record_sync

    def record_sync(kind: str, *, device: int | None = None) -> None:
        if kind not in _UNCHECKED:
            check()
        record(kind, device=device)

    saved = _mode[0]
    _mode[0] = 0
    state.record_sync = record_sync  # type: ignore[method-assign]
    try:
        yield
    finally:
        del state.record_sync
        _mode[0] = saved
