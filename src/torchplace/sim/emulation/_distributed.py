"""``torch.distributed`` inside a simulation.

NCCL needs GPUs, so a process group asked for NCCL (or for the default backend, which is
NCCL when CUDA is available) is made with a backend that runs here instead, and the report
says so: with real values, ``gloo`` — it really all-reduces the simulated tensors' data,
across processes too; with placeholder values there is no data to move, so torch's fake
process group (``torch.testing._internal.distributed.fake_pg``), whose collectives return
at once.

``DistributedDataParallel`` builds its gradient buckets in C++ with the parameters' tensor
options; the simulator labels them with the module's simulated device by running DDP's
constructor and forward as a call on that device. With placeholder values DDP's C++
reducer cannot run its backward, and the simulator models it instead (see
:func:`_model_gradient_sync`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from torchplace.sim.accounting._state import SimState
from torchplace.sim.emulation._modes import SimFunctionMode

__all__ = ["patched_distributed"]


def _wants_gpu_backend(backend: Any) -> bool:
    return backend is None or "nccl" in str(backend).lower()


def _first_label(state: SimState, module: torch.nn.Module) -> int | None:
    for p in module.parameters():
        label = state.label(p)
        if label is not None:
            return label
    return None


_VERIFY = "_verify_param_shape_across_processes"


@contextlib.contextmanager
def _placeholder_ddp(state: SimState) -> Iterator[None]:
    """DDP checks that every rank has the same parameter shapes by all-gathering them and
    reading them back; placeholder values carry no shapes to compare (and every rank runs
    the same script), so the check is skipped. The buckets DDP's reducer allocates while
    it is built are its communication buffers."""
    import torch.nn.parallel.distributed as ddp_module

    real = getattr(ddp_module, _VERIFY)
    if not state.real:
        setattr(ddp_module, _VERIFY, lambda *a, **k: None)
    state.category_override = "communication"
    try:
        yield
    finally:
        state.category_override = None
        setattr(ddp_module, _VERIFY, real)


def _model_gradient_sync(ddp: Any, state: SimState, label: int) -> None:
    """With placeholder values DDP's C++ reducer cannot run its backward (it reads the
    buckets' memory when it rebuilds them, and crashes on data-less buckets), so the
    simulator models what it does: the buckets stay allocated (they were built with the
    module), gradients are separate tensors (DDP's default, gradient_as_bucket_view=False),
    and each gradient's all-reduce is priced when autograd has accumulated it, unless
    the step is inside ``no_sync()`` (torch/csrc/distributed/c10d/reducer.cpp)."""
    ddp.require_backward_grad_sync = False  # the reducer's hooks return at once
    ddp._torchplace_sync = True
    world = ddp.process_group.size()

    def synced(p: torch.Tensor) -> None:
        if getattr(ddp, "_torchplace_sync", True) and p.grad is not None:
            state.collective(label, "all_reduce", p.grad.nbytes, world)

    for p in ddp.module.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(synced)
    state.note(
        "DistributedDataParallel with placeholder values: its buckets are allocated as DDP "
        "allocates them and the gradient all-reduce is priced, but the C++ reducer does not "
        "run (it needs bucket data)"
    )


@contextlib.contextmanager
def patched_distributed(state: SimState, fmode: SimFunctionMode) -> Iterator[None]:
    """Substitute a runnable backend for NCCL and label DDP's buckets (module docstring)."""
    import torch.distributed as dist

    if not dist.is_available():
        yield
        return
    from torch.nn.parallel import DistributedDataParallel as DDP

    real_init_pg, real_destroy_pg = dist.init_process_group, dist.destroy_process_group
    real_ddp_init, real_ddp_forward, real_no_sync = DDP.__init__, DDP.forward, DDP.no_sync

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        patch_rng_tracker()
        if _wants_gpu_backend(backend):
            asked = backend or "the default backend (NCCL on CUDA)"
            if state.real:
                backend = "gloo"
                what = "gloo, which really exchanges the simulated tensors' data"
            else:
                from torch.testing._internal.distributed import fake_pg

                backend = "fake"
                kwargs.pop("init_method", None)
                kwargs["store"] = fake_pg.FakeStore()
                kwargs.setdefault("rank", int(os.environ.get("RANK", 0)))
                kwargs.setdefault("world_size", int(os.environ.get("WORLD_SIZE", 1)))
                what = "torch's fake process group (placeholder values: no data to move)"
            state.note(f"not simulated: NCCL; init_process_group({asked!r}) runs with {what}")
        return real_init_pg(backend, *args, **kwargs)

    def destroy_process_group(*args: Any, **kwargs: Any) -> None:
        # With real values the simulated NCCL is gloo, whose worker threads may still be
        # dropping their references to the last collective's tensors, which takes the GIL;
        # destroying the group joins those threads while holding it, and the run can hang
        # (seen with the DDP tutorial's multigpu.py on a busy machine; at exit the same race
        # aborts, pytorch/pytorch#190489). Giving up the GIL for a moment lets them finish.
        time.sleep(0.1)
        real_destroy_pg(*args, **kwargs)

    def ddp_init(self: Any, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        label = _first_label(state, module)
        with fmode.on(label), _placeholder_ddp(state):
            real_ddp_init(self, module, *args, **kwargs)
        if label is not None and not state.real:
            _model_gradient_sync(self, state, label)

    def no_sync(self: Any) -> Any:
        saved = getattr(self, "_torchplace_sync", True)
        self._torchplace_sync = False
        try:
            with real_no_sync(self):
                yield
        finally:
            self._torchplace_sync = saved

    def ddp_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        with fmode.on(_first_label(state, self.module)):
            return real_ddp_forward(self, *args, **kwargs)

    # DTensor's random ops (nn.init on FSDP2 shards) make an RNG tracker that reads the CUDA
    # generator's state, moves it to the mesh's device from inside DTensor's dispatch (where
    # the function mode is popped) and compares it with rank 0's
    # (torch/distributed/tensor/_random.py, OffsetBasedRNGTracker): the move is made to see
    # the simulation, and with placeholder values, which hold no state to compare, the check
    # is skipped. Patched once DTensor is in use (importing it costs 0.7 s of start-up).
    restore: list[Callable[[], None]] = []

    def patch_rng_tracker() -> None:
        if restore:
            return
        from torch.distributed.tensor import _random

        tracker = _random.OffsetBasedRNGTracker
        real_device_state, real_tracker_init = tracker._get_device_state, tracker.__init__

        def tracker_init(self: Any, mesh: Any, run_state_sync: bool = True, **kw: Any) -> None:
            real_tracker_init(self, mesh, run_state_sync and state.real, **kw)

        def undo() -> None:
            tracker._get_device_state = real_device_state  # type: ignore[method-assign]
            tracker.__init__ = real_tracker_init  # type: ignore[method-assign]

        tracker._get_device_state = fmode.reentrant(real_device_state)  # type: ignore[method-assign]
        tracker.__init__ = tracker_init  # type: ignore[method-assign,assignment]
        restore.append(undo)

    if "torch.distributed.tensor" in sys.modules:
        patch_rng_tracker()
    saved = dist.is_nccl_available
    dist.init_process_group = init_process_group
    dist.destroy_process_group = destroy_process_group
    dist.is_nccl_available = lambda: True
    DDP.__init__ = ddp_init  # type: ignore[method-assign]
    DDP.forward = ddp_forward  # type: ignore[method-assign]
    DDP.no_sync = contextlib.contextmanager(no_sync)  # type: ignore[method-assign]
    try:
        yield
    finally:
        dist.init_process_group = real_init_pg
        dist.destroy_process_group = real_destroy_pg
        dist.is_nccl_available = saved
        DDP.__init__ = real_ddp_init  # type: ignore[method-assign]
        DDP.forward = real_ddp_forward  # type: ignore[method-assign]
        DDP.no_sync = real_no_sync  # type: ignore[method-assign]
        for undo in restore:
            undo()
