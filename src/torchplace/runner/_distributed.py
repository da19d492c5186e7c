"""The process's place in a ``torch.distributed`` job: rank, world size, the process group.

torchrun starts one process per device and tells each where it stands through environment
variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``).
This module reads them, starts and ends the process group, and unwraps DDP models.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["unwrap"]

_SETTLE_SECONDS = 0.1


@dataclass(frozen=True)
class _Place:
    rank: int
    local_rank: int
    world_size: int


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as e:
        raise RuntimeError(
            f"the environment variable {name}={raw!r} is not an integer; it is set by torchrun "
            f"(torchplace run) for each process: unset it, or launch with torchplace run."
        ) from e


def _group_ready() -> bool:
    return dist.is_available() and dist.is_initialized()


def _place() -> _Place:
    """This process's rank, local rank and world size: from the process group if one is
    running, else from torchrun's environment variables, else a single process."""
    local_rank = _env_int("LOCAL_RANK", 0)
    if _group_ready():
        return _Place(dist.get_rank(), local_rank, dist.get_world_size())
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    if world_size < 1 or not 0 <= rank < world_size:
        raise RuntimeError(
            f"RANK={rank} and WORLD_SIZE={world_size} do not describe a process of a job "
            f"(need 0 <= RANK < WORLD_SIZE): launch with torchplace run (torchrun)."
        )
    return _Place(rank, local_rank, world_size)


def _start_group(backend: str, device: torch.device, place: _Place) -> None:
    """Join the job's process group (``env://``: torchrun's variables say where rank 0 is)."""
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
    if missing:
        raise RuntimeError(
            f"WORLD_SIZE={place.world_size} says this process is one of a job, but "
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set, so it "
            f"cannot find the others: launch the script with torchplace run (or torchrun), "
            f"which sets them."
        )
    if device.type == "cuda":
        _set_cuda_device(device)
    try:
        dist.init_process_group(
            backend=backend,
            rank=place.rank,
            world_size=place.world_size,
            device_id=device if device.type == "cuda" else None,
        )
    except (RuntimeError, ValueError, OSError) as e:
        where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
        raise RuntimeError(
            f"process {place.rank} of {place.world_size} could not join the {backend} process "
            f"group at {where}: {e}"
        ) from e


def _end_group() -> None:
    if _group_ready():
        dist.destroy_process_group()
        # A gloo worker thread may still be dropping its reference to the last collective's
        # tensors, which takes the GIL. If the interpreter is already finalizing by then,
        # the thread is cancelled inside C++ and the process aborts ("terminate called
        # without an active exception", pytorch/pytorch#190489) after a successful run.
        # Giving up the GIL for a moment lets those threads finish while Python is alive.
        time.sleep(_SETTLE_SECONDS)


def _comm_device() -> torch.device:
    """Where tensors must live for collectives: the current GPU for NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _rank0_flag(ok: bool) -> bool:
    """Broadcast rank 0's ``ok`` to every rank; the others wait here until rank 0 sends."""
    flag = torch.tensor([1 if ok else 0], device=_comm_device())
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def unwrap(model: nn.Module) -> nn.Module:
    """The user's module inside DDP, ``nn.DataParallel`` and ``torch.compile`` wrappers.

    Its ``state_dict()`` has no ``module.`` or ``_orig_mod.`` prefixes, so it loads into
    the plain model, with or without a wrapper.

    Examples:
        >>> from torch import nn
        >>> net = nn.Linear(2, 2)
        >>> unwrap(nn.DataParallel(net)) is net
        True
    """
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel | nn.DataParallel):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):  # torch.compile
            model = model._orig_mod  # type: ignore[assignment]
        else:
            return model


# --- seams ------------------------------------------------------------------------------


def _set_cuda_device(device: torch.device) -> None:
    torch.cuda.set_device(device)
