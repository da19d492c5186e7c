"""Safe checkpoints: atomic writes, ``weights_only`` reads, loads onto any machine.

``save(path, **state)`` writes every object that has a ``state_dict()`` (models, unwrapped
from DDP; optimizers; GradScalers; LR schedulers) and every plain value (numbers,
strings, tensors, and lists/dicts of them), plus the random number generator states of
every process (Python, NumPy when installed, torch CPU, and CUDA once the process uses it).
``load(path, **state)`` fills the given objects in place, restores the random states, and
returns the plain values.

Guarantees:

- A crash while saving never destroys the previous checkpoint: the file is written to a
  temporary file in the same directory, flushed and ``fsync``-ed, then renamed over the
  old one with ``os.replace`` (atomic), and the directory is ``fsync``-ed. Temporary files
  left by a killed save are removed by the next save of the same checkpoint.
- Only rank 0 writes; the other ranks wait until it has finished (``save`` is collective
  when a process group is running: call it on every rank). Every rank reads.
- Reading uses ``torch.load(weights_only=True)`` (no code in the file is run) and maps
  every tensor to ``map_location`` (the CPU by default), so a checkpoint saved on
  ``cuda:3`` loads on a machine without a GPU; ``load_state_dict`` then copies the values
  onto the devices the objects live on now.
- A damaged file (truncated, corrupted: every record's CRC-32 is checked) or a missing
  one is an error that names the file.

Examples:
    >>> import os, tempfile, torch
    >>> from torchplace.runner import save, load
    >>> model = torch.nn.Linear(2, 2)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    >>> save(path, model=model, optimizer=opt, step=100)
    >>> load(path, model=model, optimizer=opt)
    {'step': 100}
"""

from __future__ import annotations

import contextlib
import os
import pickle
import random
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from torchplace.runner._distributed import _group_ready, _rank0_flag, unwrap

__all__ = ["load", "save"]

_FORMAT = "torchplace.checkpoint"
_VERSION = 1
_TMP_MARK = ".tmp-"


def save(path: str | os.PathLike[str], **state: Any) -> None:
    """Write a checkpoint atomically: the old file survives a crash at any moment.

    Args:
        path: the checkpoint file; its directory is created if missing.
        **state: objects with ``state_dict()`` (a DDP-wrapped model is saved without the
            ``module.`` prefix) and plain values (``None``, bool, int, float, str, tensors,
            and lists, tuples and str/int-keyed dicts of them).

    Raises:
        ValueError: nothing to save, or a value that is neither (the message names it).
        RuntimeError: the file could not be written (disk full, no permission); the old
            checkpoint is untouched.

    Examples:
        >>> import os, tempfile, torch
        >>> path = os.path.join(tempfile.mkdtemp(), "run", "last.pt")
        >>> save(path, model=torch.nn.Linear(2, 2), epoch=3, metrics={"loss": 0.25})
        >>> sorted(os.listdir(os.path.dirname(path)))
        ['last.pt']
    """
    path = Path(path)
    if not state:
        raise ValueError(
            "save() got nothing to save: name what to keep, e.g. "
            "save(path, model=model, optimizer=optimizer, step=step)."
        )
    objects = {k: v for k, v in state.items() if _is_stateful(v)}
    values = {k: v for k, v in state.items() if k not in objects}
    for name, value in values.items():
        _check_plain(f"save({name}=...)", value, value)

    distributed = _group_ready()
    rng = _gather_rng() if distributed else [_rng_state()]
    if distributed and dist.get_rank() != 0:
        if not _rank0_flag(False):
            raise RuntimeError(f"rank 0 could not write the checkpoint {path} (see its error).")
        return
    error: BaseException | None = None
    try:
        payload = {
            "format": _FORMAT,
            "version": _VERSION,
            "objects": {k: _state_dict(k, v) for k, v in objects.items()},
            "values": values,
            "rng": rng,
        }
        _write_atomic(path, payload)
    except BaseException as e:
        error = e
    if distributed:
        _rank0_flag(error is None)
    if error is not None:
        raise error


def load(
    path: str | os.PathLike[str],
    *,
    map_location: str | torch.device | None = None,
    **state: Any,
) -> dict[str, Any]:
    """Read a checkpoint, fill the given objects in place and return its plain values.

    Args:
        path: a file written by :func:`save`.
        map_location: where the file's tensors are read to before ``load_state_dict``
            copies them into the objects (default: the CPU). The objects stay on their
            devices; only tensors among the returned values end up here.
        **state: the objects to fill, by the names they were saved under: modules (DDP
            wrapped or not), optimizers, GradScalers, LR schedulers.

    Returns:
        Every plain value of the checkpoint, by name (e.g. ``{"step": 100}``).

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is damaged or not a torchplace checkpoint, a name is not in
            it, or a saved state does not fit the object given (the message says which).

    Examples:
        >>> import os, tempfile, torch
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
        >>> save(path, model=torch.nn.Linear(2, 2), step=7)
        >>> fresh = torch.nn.Linear(2, 2)
        >>> load(path, model=fresh)["step"]
        7
    """
    path = Path(path)
    for name, obj in state.items():
        if not _is_stateful(obj):
            raise ValueError(
                f"load() fills objects that have load_state_dict(), but {name}= is a "
                f"{type(obj).__name__}: plain values come back from load(), e.g. "
                f"step = load(path, model=model)[{name!r}]."
            )
    payload = _read(path, torch.device("cpu") if map_location is None else map_location)
    saved = payload["objects"]
    for name, obj in state.items():
        if name not in saved:
            raise ValueError(
                f"the checkpoint {path} has no {name!r}: it holds the objects "
                f"{sorted(saved) or 'none'} and the values {sorted(payload['values']) or 'none'}."
            )
        target = unwrap(obj) if isinstance(obj, nn.Module) else obj
        try:
            target.load_state_dict(saved[name])
        except (RuntimeError, ValueError, KeyError, TypeError) as e:
            raise ValueError(
                f"the {name!r} saved in {path} does not fit the {type(target).__name__} given: {e}"
            ) from e
    _restore_rng(payload["rng"])
    return dict(payload["values"])


# --- what goes in ---------------------------------------------------------------------

# what torch.load(weights_only=True) rebuilds (containers are checked item by item)
_PLAIN = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    torch.Tensor,
    torch.Size,
    torch.dtype,
    torch.device,
)


def _is_stateful(obj: object) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def _state_dict(name: str, obj: Any) -> Any:
    state = unwrap(obj).state_dict() if isinstance(obj, nn.Module) else obj.state_dict()
    _check_plain(f"the state_dict() of {name}=", state, state)
    return state


def _check_plain(what: str, value: Any, part: Any) -> None:
    if isinstance(part, _PLAIN):
        return
    if isinstance(part, list | tuple):
        for item in part:
            _check_plain(what, value, item)
        return
    if isinstance(part, Mapping):
        for key, item in part.items():
            if not isinstance(key, str | int):
                raise ValueError(
                    f"{what} holds a dict key {key!r} of type {type(key).__name__}: "
                    f"checkpoint dicts are keyed by str or int."
                )
            _check_plain(what, value, item)
        return
    inside = "" if part is value else f" (inside {type(value).__name__})"
    raise ValueError(
        f"{what} holds a {type(part).__name__}{inside}, which is neither an object "
        f"with state_dict() nor a plain value (None, bool, int, float, str, tensor, and "
        f"lists/dicts of them). Checkpoints hold only these so that load() can read them "
        f"with torch.load(weights_only=True), which runs no code from the file: save its "
        f"state_dict() or convert it to plain values."
    )


# --- writing ----------------------------------------------------------------------------


def _write_atomic(path: Path, payload: dict[str, Any]) -> None:
    directory = path.absolute().parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"cannot create the directory {directory} for {path}: {e}") from e
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}{_TMP_MARK}{os.getpid()}-")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise RuntimeError(
                f"could not write the checkpoint {path}: {e}. The previous checkpoint, if "
                f"any, is untouched."
            ) from e
        raise
    _fsync_directory(directory)


def _remove_stale_temporaries(path: Path) -> None:
    """Remove temporary files of this checkpoint whose writer process no longer exists."""
    directory = path.absolute().parent
    prefix = f".{path.name}{_TMP_MARK}"
    for name in os.listdir(directory):
        pid = name[len(prefix) :].split("-", 1)[0] if name.startswith(prefix) else ""
        if pid.isdigit() and not _process_alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(directory / name)


def _process_alive(pid: int) -> bool:
    if os.name != "posix":
        return True  # no cheap liveness check: keep the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX); Windows cannot open a directory for this."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- reading ----------------------------------------------------------------------------


def _read(path: Path, map_location: str | torch.device) -> dict[str, Any]:
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise FileNotFoundError(
            f"no checkpoint at {path} ({path.absolute()} {what}): check the path, or start "
            f"from scratch when no checkpoint was saved yet (if os.path.exists(path): load(...))."
        )
    size = path.stat().st_size
    damaged = (
        f"the checkpoint {path} ({size} bytes) is damaged: {{}}. It was cut short (a copy "
        f"interrupted, a full disk) or changed after it was written, or it is not a PyTorch "
        f"checkpoint; load an earlier checkpoint or start again."
    )
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(damaged.format(f"it is not a complete zip archive ({e})")) from e
    if bad is not None:
        raise ValueError(damaged.format(f"the record {bad!r} fails its CRC-32 check"))
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise ValueError(
            f"{path} holds objects that torch.load(weights_only=True) refuses to rebuild, "
            f"so it was not written by torchplace.save. If you trust the file, read it with "
            f"torch.load(path, weights_only=False). ({str(e).splitlines()[-1]})"
        ) from e
    except Exception as e:
        raise ValueError(damaged.format(f"torch.load failed ({type(e).__name__}: {e})")) from e
    if not (isinstance(payload, dict) and payload.get("format") == _FORMAT):
        kind = type(payload).__name__
        keys = f" with keys {sorted(map(str, payload))[:8]}" if isinstance(payload, dict) else ""
        raise ValueError(
            f"{path} is a PyTorch file (a {kind}{keys}) but not a torchplace checkpoint: read "
            f"it with torch.load(path, weights_only=True) and load_state_dict() yourself."
        )
    if payload.get("version", 0) > _VERSION:
        raise ValueError(
            f"{path} was written by a newer torchplace (checkpoint format "
            f"{payload['version']}, this one reads up to {_VERSION}): upgrade torchplace."
        )
    return payload


# --- random number generators ---------------------------------------------------------


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    np_random = _numpy_random()
    if np_random is not None:
        np_state = np_random.get_state(legacy=False)
        state["numpy"] = {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype("int64")),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        }
    if _cuda_initialized():  # reading the states would otherwise start CUDA in this process
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _gather_rng() -> list[dict[str, Any]]:
    """Every rank's random states, in rank order, on rank 0 (an empty list elsewhere)."""
    mine = _rng_state()
    rank, world = dist.get_rank(), dist.get_world_size()
    states: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(mine, states, dst=0)
    return list(states) if states is not None else []


def _restore_rng(states: list[dict[str, Any]]) -> None:
    if not states:
        return
    index = dist.get_rank() if _group_ready() else 0
    state = states[index] if index < len(states) else states[0]
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(state["torch"])
    np_random = _numpy_random()
    if np_random is not None and "numpy" in state:
        saved = state["numpy"]
        np_random.set_state(
            {
                "bit_generator": saved["bit_generator"],
                "state": {"key": saved["key"].numpy().astype("uint32"), "pos": saved["pos"]},
                "has_gauss": saved["has_gauss"],
                "gauss": saved["gauss"],
            }
        )
    if "cuda" in state and _cuda_available():  # applied when CUDA starts, if it has not yet
        torch.cuda.set_rng_state_all(state["cuda"][: torch.cuda.device_count()])


# --- seams ------------------------------------------------------------------------------


def _numpy_random() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy.random


def _cuda_available() -> bool:
    return torch.cuda.is_available()


def _cuda_initialized() -> bool:
    return torch.cuda.is_initialized()
