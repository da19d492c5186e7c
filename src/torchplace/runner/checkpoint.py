"""Safe checkpoints: atomic writes, ``weights_only`` reads, verified before anything changes.

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
- ``load`` never returns wrong data and never half-loads: the file is sealed with a SHA-256
  of all its bytes, checked before anything is unpickled (see
  ``torchplace.runner._checkpoint_file``); then every saved state is checked against the
  object it goes into (keys, shapes, dtypes, parameter groups) and every random state is
  tried on a generator of its own, and only then is anything changed. Anything wrong is
  one ``ValueError`` that names the file, says what is wrong and what to do. A missing file
  is a ``FileNotFoundError`` that names it.
- Files written before the seal (checkpoint format 1) still load, with a warning: their
  zip structure is checked strictly and every record's CRC-32 is tested.

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
import copy
import os
import random
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from torchplace.runner import _checkpoint_file
from torchplace.runner._checkpoint_file import FORMAT, VERSION
from torchplace.runner._distributed import _group_ready, _rank0_flag, unwrap

__all__ = ["load", "save"]


def save(path: str | os.PathLike[str], **state: Any) -> None:
    """Write a checkpoint atomically: the old file survives a crash at any moment.

    The file is what ``torch.save`` writes (``torch.load(path, weights_only=True)`` reads
    it), sealed with a SHA-256 of all its bytes in the zip archive's comment
    (``unzip -z path`` shows it).

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
            "format": FORMAT,
            "version": VERSION,
            "objects": {k: _state_dict(k, v) for k, v in objects.items()},
            "values": values,
            "rng": rng,
        }
        path, placeholder = _simulated_target(path, payload)
        with torch.serialization.skip_data() if placeholder else contextlib.nullcontext():
            _checkpoint_file.write_atomic(path, payload, placeholder=placeholder)
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

    Nothing changes unless everything fits: the file's seal (a SHA-256 of all its bytes),
    the structure of what it holds, every saved state against the object it goes into
    (a model's keys, shapes and dtypes; an optimizer's parameter groups and per-parameter
    state; a scheduler's or GradScaler's fields) and the random states are all checked
    first. Then the objects are filled and the random states restored.

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
            it, or a saved state does not fit the object given (the message says which);
            no object and no random state has changed.

    Warns:
        UserWarning: the file was written before checkpoints were sealed (format 1): it
            was checked as strictly as that format allows; saving it again seals it.

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
    path, placeholder = _simulated_source(path)
    with torch.serialization.skip_data() if placeholder else contextlib.nullcontext():
        payload, version = _checkpoint_file.read(
            path,
            torch.device("cpu") if map_location is None else map_location,
            placeholder=placeholder,
        )
    plan = _plan(path, payload, state, placeholder=placeholder)
    if version < VERSION:
        warnings.warn(
            f"{path} is a checkpoint of format {version}, written before torchplace sealed "
            f"checkpoints with a SHA-256 of all their bytes: its zip structure, every "
            f"record's CRC-32 and every saved state's keys and shapes were checked, which "
            f"catches most damage but not all. Save it again to seal it.",
            UserWarning,
            stacklevel=2,
        )
    _apply(path, plan)
    return plan.values


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


# --- inside torchplace sim ---------------------------------------------------------------


def _simulated_target(path: Path, payload: Any) -> tuple[Path, bool]:
    """Inside ``torchplace sim``, where a checkpoint of simulated tensors goes (a simulated
    run never replaces a real checkpoint; see torchplace.sim.emulation._files), and whether it is
    written without data (placeholder values)."""
    from torchplace.sim.emulation import _files

    files = _files.current()
    if files is None:
        return path, False
    target, placeholder = files.target(path, payload)
    return Path(target), placeholder


def _simulated_source(path: Path) -> tuple[Path, bool]:
    """Inside ``torchplace sim``, where a load of ``path`` reads, and whether it is data-less."""
    from torchplace.sim.emulation import _files

    files = _files.current()
    if files is None:
        return path, False
    source, placeholder = files.source(path)
    return Path(source), placeholder


# --- checking everything before anything changes ----------------------------------------


class _Unfit(Exception):
    """What does not fit, as the end of a sentence (caught where the file name is known)."""


@dataclass
class _Plan:
    """What load will do, once everything is checked."""

    loads: list[tuple[str, Any, Any, str]] = field(default_factory=list)  # name, obj, state, kind
    rng: dict[str, Any] | None = None
    values: dict[str, Any] = field(default_factory=dict)


# applied in this order: what can be put back first, modules (which cannot) last
_KINDS = ("other", "scheduler", "scaler", "optimizer", "module")

# the per-element state of torch.optim's optimizers: shaped like the parameter
_ELEMENTWISE = frozenset(
    {
        "exp_avg",
        "exp_avg_sq",
        "max_exp_avg_sq",
        "exp_inf",
        "momentum_buffer",
        "sum",
        "square_avg",
        "acc_delta",
        "grad_avg",
        "ax",
        "prev",
        "step_size",
    }
)


def _damaged(path: Path, what: str) -> ValueError:
    return _checkpoint_file.damaged(path, path.stat().st_size, what)


def _plan(
    path: Path, payload: dict[str, Any], state: dict[str, Any], *, placeholder: bool
) -> _Plan:
    expected = {"format", "version", "objects", "values", "rng"}
    if payload.keys() != expected:
        raise _damaged(
            path, f"it holds the entries {sorted(map(str, payload))}, not {sorted(expected)}"
        )
    saved, values = payload["objects"], payload["values"]
    for what, part in (("objects", saved), ("values", values)):
        if not (isinstance(part, dict) and all(isinstance(k, str) for k in part)):
            raise _damaged(path, f"its {what} are a {type(part).__name__}, not a dict by name")
    for name, obj_state in saved.items():
        if not isinstance(obj_state, Mapping):
            raise _damaged(
                path, f"the state of {name!r} is a {type(obj_state).__name__}, not a dict"
            )
    plan = _Plan(values=dict(values))
    for name, obj in state.items():
        if name not in saved:
            raise ValueError(
                f"the checkpoint {path} has no {name!r}: it holds the objects "
                f"{sorted(saved) or 'none'} and the values {sorted(values) or 'none'}."
            )
        target = unwrap(obj) if isinstance(obj, nn.Module) else obj
        kind = _kind(target)
        try:
            _FITS[kind](target, saved[name])
        except _Unfit as e:
            raise ValueError(
                f"the {name!r} saved in {path} does not fit the {type(target).__name__} "
                f"given: {e}. Nothing was loaded: pass an object built like the one saved "
                f"as {name!r}."
            ) from None
        plan.loads.append((name, target, saved[name], kind))
    plan.loads.sort(key=lambda load: _KINDS.index(load[3]))
    try:
        plan.rng = _rng_plan(payload["rng"], placeholder=placeholder)
    except _Unfit as e:
        raise _damaged(path, f"its random states are not valid ({e})") from None
    return plan


def _kind(target: Any) -> str:
    if isinstance(target, nn.Module):
        return "module"
    if isinstance(target, torch.optim.Optimizer):
        return "optimizer"
    if isinstance(
        target, torch.optim.lr_scheduler.LRScheduler | torch.optim.lr_scheduler.ReduceLROnPlateau
    ):
        return "scheduler"
    if isinstance(target, torch.amp.GradScaler):
        return "scaler"
    return "other"


def _fit_module(target: nn.Module, saved: Mapping[str, Any]) -> None:
    """What ``load_state_dict(strict=True)`` checks, before it copies anything."""
    current = target.state_dict()
    missing = [k for k in current if k not in saved]
    unexpected = [k for k in saved if k not in current]
    if missing or unexpected:
        parts = [f"missing keys {_few(missing)}"] if missing else []
        parts += [f"unexpected keys {_few(unexpected)}"] if unexpected else []
        raise _Unfit(" and ".join(parts))
    for key, have in current.items():
        got = saved[key]
        if not isinstance(have, torch.Tensor):
            continue  # extra state: the module's set_extra_state takes what it gets
        if not isinstance(got, torch.Tensor):
            raise _Unfit(f"{key} is a {type(got).__name__} in the checkpoint, a tensor here")
        if nn.parameter.is_lazy(have):
            continue  # a lazy module takes its shape from the checkpoint
        if got.shape != have.shape:
            raise _Unfit(
                f"size mismatch for {key}: shape {list(got.shape)} in the checkpoint, "
                f"{list(have.shape)} here"
            )
        if got.dtype != have.dtype and not (got.is_floating_point() and have.is_floating_point()):
            raise _Unfit(f"{key} is {got.dtype} in the checkpoint, {have.dtype} here")


def _fit_optimizer(target: torch.optim.Optimizer, saved: Mapping[str, Any]) -> None:
    """What ``Optimizer.load_state_dict`` checks, and the shapes of per-element state."""
    groups, state = saved.get("param_groups"), saved.get("state")
    if not (isinstance(groups, list | tuple) and isinstance(state, Mapping)):
        raise _Unfit(
            f"it holds {sorted(map(str, saved))}, not an optimizer's state and param_groups"
        )
    if len(groups) != len(target.param_groups):
        raise _Unfit(
            f"parameter groups: {len(groups)} in the checkpoint, {len(target.param_groups)} here"
        )
    params: dict[Any, torch.Tensor] = {}
    for i, (group, mine) in enumerate(zip(groups, target.param_groups, strict=True)):
        if not (isinstance(group, Mapping) and isinstance(group.get("params"), list | tuple)):
            raise _Unfit(f"parameter group {i} lists no parameters")
        if len(group["params"]) != len(mine["params"]):
            raise _Unfit(
                f"parameter group {i} has {len(group['params'])} parameters in the checkpoint, "
                f"{len(mine['params'])} here"
            )
        for key in sorted(group.keys() & mine.keys() - {"params", "param_names"}):
            _fit_value(group[key], mine[key], f"parameter group {i}'s {key!r}")
        for index, param in zip(group["params"], mine["params"], strict=True):
            if type(index) is not int or index in params:
                raise _Unfit(f"parameter group {i} lists the parameter {index!r} wrongly")
            params[index] = param
    elementwise = type(target).__module__.startswith("torch.optim.")
    for index, entry in state.items():
        if index not in params:
            raise _Unfit(f"it holds state for parameter {index!r}, which no parameter group lists")
        if not (isinstance(entry, Mapping) and all(isinstance(k, str) for k in entry)):
            raise _Unfit(f"the state of parameter {index} is not a dict of named values")
        param = params[index]
        for key, value in entry.items():
            if (
                elementwise
                and key in _ELEMENTWISE
                and isinstance(value, torch.Tensor)
                and not nn.parameter.is_lazy(param)
                and value.shape != param.shape
            ):
                raise _Unfit(
                    f"the {key} of parameter {index} has shape {list(value.shape)} in the "
                    f"checkpoint, the parameter {list(param.shape)}"
                )


def _fit_scheduler(target: Any, saved: Mapping[str, Any]) -> None:
    current = target.state_dict()
    missing = [k for k in current if k not in saved and not k.startswith("_")]
    if missing:  # private fields come and go between torch versions; the public ones stay
        raise _Unfit(f"missing fields {_few(missing)}")
    for key in sorted(current.keys() & saved.keys()):
        _fit_value(saved[key], current[key], repr(key))


def _fit_scaler(target: torch.amp.GradScaler, saved: Mapping[str, Any]) -> None:
    if not target.is_enabled():
        return  # a disabled scaler's load_state_dict ignores what it gets
    current = target.state_dict()
    missing = [k for k in current if k not in saved]
    if missing:
        raise _Unfit(
            f"missing fields {_few(missing)}"
            + (" (it was saved from a disabled GradScaler)" if not saved else "")
        )
    for key in sorted(current):
        _fit_value(saved[key], current[key], repr(key))


def _fit_other(target: Any, saved: Mapping[str, Any]) -> None:
    """Nothing is known of an object's state_dict: it is put back if loading it fails."""


_FITS: dict[str, Callable[[Any, Mapping[str, Any]], None]] = {
    "module": _fit_module,
    "optimizer": _fit_optimizer,
    "scheduler": _fit_scheduler,
    "scaler": _fit_scaler,
    "other": _fit_other,
}


def _fit_value(saved: Any, current: Any, where: str) -> None:
    """``saved`` can replace ``current``: numbers for numbers, same lengths, same shapes."""
    if saved is None or current is None:
        return
    if _is_number(saved) and _is_number(current):
        return
    if isinstance(saved, torch.Tensor) and isinstance(current, torch.Tensor):
        if saved.shape != current.shape:
            raise _Unfit(f"{where} has shape {list(saved.shape)}, {list(current.shape)} here")
        return
    if isinstance(saved, list | tuple) and isinstance(current, list | tuple):
        if len(saved) != len(current):
            raise _Unfit(f"{where} has {len(saved)} items in the checkpoint, {len(current)} here")
        for i, (a, b) in enumerate(zip(saved, current, strict=True)):
            _fit_value(a, b, f"{where}[{i}]")
        return
    if isinstance(saved, Mapping) and isinstance(current, Mapping):
        for key in saved.keys() & current.keys():
            _fit_value(saved[key], current[key], f"{where}[{key!r}]")
        return
    if type(saved) is not type(current):
        raise _Unfit(
            f"{where} is a {type(saved).__name__} in the checkpoint, a "
            f"{type(current).__name__} here"
        )


def _is_number(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return x.dim() == 0
    return isinstance(x, bool | int | float)


def _few(keys: list[str]) -> str:
    shown = ", ".join(repr(k) for k in keys[:5])
    return f"{shown} and {len(keys) - 5} more" if len(keys) > 5 else shown


# --- applying ---------------------------------------------------------------------------


def _apply(path: Path, plan: _Plan) -> None:
    # what puts each object back if a later one fails (None: a module, not copied)
    snapshots = [_snapshot(target, kind) for _, target, _, kind in plan.loads]
    done: list[tuple[str, Any, Any]] = []
    for (name, target, saved, _), snapshot in zip(plan.loads, snapshots, strict=True):
        try:
            target.load_state_dict(saved)
        except Exception as e:
            changed = _undo([*done, (name, target, snapshot)])
            state = (
                "nothing was changed"
                if not changed
                else f"{_few(changed)} may be partly loaded and could not be put back: "
                f"rebuild them before using them"
            )
            raise ValueError(
                f"the {name!r} saved in {path} passed every check, but the "
                f"{type(target).__name__}'s load_state_dict refused it "
                f"({type(e).__name__}: {e}); {state}. Pass an object built like the one "
                f"saved as {name!r}."
            ) from e
        done.append((name, target, snapshot))
    if plan.rng is not None:
        _restore_rng(plan.rng)


def _snapshot(target: Any, kind: str) -> Any:
    """What puts ``target`` back after a failed load (None: nothing, for a module)."""
    if kind == "module":  # copying every weight would double the model's memory
        return None
    try:
        state = target.state_dict()
        if kind == "optimizer":  # load_state_dict swaps state tensors, never writes into them
            return {
                "state": {k: dict(v) for k, v in state["state"].items()},
                "param_groups": [dict(g) for g in state["param_groups"]],
            }
        return copy.deepcopy(state)
    except Exception:
        return None  # cannot be copied: named if a later load fails


def _undo(done: list[tuple[str, Any, Any]]) -> list[str]:
    """Put back what can be; the names of what could not."""
    changed = []
    for name, target, snapshot in reversed(done):
        if snapshot is None:
            changed.append(name)
            continue
        try:
            target.load_state_dict(snapshot)
        except Exception:
            changed.append(name)
    return changed


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


def _rng_plan(states: Any, *, placeholder: bool) -> dict[str, Any] | None:
    """This process's random states, checked on generators of their own; None if none."""
    if not isinstance(states, list):
        raise _Unfit(f"a {type(states).__name__}, not a list per rank")
    prepared = [_rng_record(state, placeholder=placeholder) for state in states]
    if not prepared:
        return None
    index = dist.get_rank() if _group_ready() else 0
    return prepared[index] if index < len(prepared) else prepared[0]


def _rng_record(state: Any, *, placeholder: bool) -> dict[str, Any]:
    known = {"python", "torch", "numpy", "cuda"}
    if not (isinstance(state, Mapping) and {"python", "torch"} <= state.keys() <= known):
        keys = sorted(map(str, state)) if isinstance(state, Mapping) else type(state).__name__
        raise _Unfit(f"a record holds {keys}")
    try:
        version, internal, gauss = state["python"]
        python = (version, tuple(internal), gauss)
        random.Random().setstate(python)
    except Exception as e:
        raise _Unfit(f"Python's state: {type(e).__name__}: {e}") from None
    prepared: dict[str, Any] = {"python": python}
    if placeholder:  # a file written with placeholder values holds no tensor data
        return prepared
    prepared["torch"] = _byte_state(state["torch"], "torch's CPU state")
    try:
        torch.Generator().set_state(prepared["torch"])
    except Exception as e:
        raise _Unfit(f"torch's CPU state: {type(e).__name__}: {e}") from None
    if "numpy" in state:
        prepared["numpy"] = _numpy_state(state["numpy"])
    if "cuda" in state:
        cuda = state["cuda"]
        if not isinstance(cuda, list | tuple):
            raise _Unfit(f"CUDA's states are a {type(cuda).__name__}, not a list per GPU")
        # no generator to try them on without starting CUDA (and torchplace sim keeps
        # CPU-sized states): their type is checked, the seal vouches for their bytes
        prepared["cuda"] = [_byte_state(s, f"CUDA's state {i}") for i, s in enumerate(cuda)]
    return prepared


def _byte_state(state: Any, what: str) -> torch.Tensor:
    if not (isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and state.dim() == 1):
        raise _Unfit(f"{what} is not a 1-D uint8 tensor")
    return state.detach().cpu()  # map_location may have put it elsewhere


def _numpy_state(saved: Any) -> dict[str, Any] | None:
    """NumPy's legacy state dict from what _rng_state saved (None: NumPy is not installed)."""
    np_random = _numpy_random()
    try:
        key = saved["key"]
        if not (isinstance(key, torch.Tensor) and key.dtype == torch.int64 and key.shape == (624,)):
            raise ValueError("the key is not 624 int64 values")
        key = key.detach().cpu()
        if int(key.min()) < 0 or int(key.max()) >= 2**32:
            raise ValueError("the key holds values outside 0 to 2**32 - 1")
        if np_random is None:
            return None
        state = {
            "bit_generator": saved["bit_generator"],
            "state": {"key": key.numpy().astype("uint32"), "pos": saved["pos"]},
            "has_gauss": saved["has_gauss"],
            "gauss": saved["gauss"],
        }
        np_random.RandomState().set_state(state)
    except Exception as e:
        raise _Unfit(f"NumPy's state: {type(e).__name__}: {e}") from None
    return state


def _restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    if "torch" in state:
        torch.set_rng_state(state["torch"])
    np_random = _numpy_random()
    if np_random is not None and state.get("numpy") is not None:
        np_random.set_state(state["numpy"])
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
