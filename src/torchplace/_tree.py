"""Walk nested data: which containers torchplace looks into, in one place.

``move_tree`` rebuilds a structure with its tensors moved (the engine of
``torchplace.to``); ``iter_tensors`` yields every tensor with the path that reaches it
(for ``where`` and the same-device check); ``find_cycle`` names a container that
contains itself.

Looked into: dict and any other ``Mapping`` (``OrderedDict`` and ``defaultdict`` keep
their type and ``default_factory``), list, tuple, namedtuple, and dataclass instances
(frozen ones too; ``init=False`` fields too). Leaves: tensors, ``nn.Module`` objects,
any object with its own ``.to()`` method (it knows best how to move itself), and
everything else (strings, numbers, ``None``, arrays, ...), which passes through.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module

__all__ = ["CycleFoundError", "find_cycle", "iter_tensors", "move_tree"]

# Leaves that are common inside batches: returned without looking for a `.to` method.
_ATOMIC: frozenset[type] = frozenset(
    {str, bytes, bytearray, int, float, complex, bool, type(None), torch.Size, torch.dtype}
)


# A batch nests a few levels. Past this depth, look for a cycle before going deeper, so
# a structure that contains itself is reported after a bounded amount of copying.
_DEPTH = 16


class CycleFoundError(Exception):
    """A container contains itself: ``path`` is the container at ``ancestor`` again."""

    def __init__(self, path: str, ancestor: str) -> None:
        super().__init__(f"{path} is {ancestor}")
        self.path = path
        self.ancestor = ancestor


class _TooDeepError(Exception):
    pass


def move_tree(obj: Any, device: torch.device, non_blocking: bool | None) -> Any:
    """Return ``obj`` with every tensor moved to ``device``, the containers rebuilt.

    Args:
        obj: A tensor, module, object with ``.to()``, or a nesting of containers.
        device: The target, already parsed.
        non_blocking: ``True``/``False`` for every tensor copy; ``None`` to decide per
            tensor: non-blocking exactly when the source is pinned host memory.

    Raises:
        CycleFoundError: A container contains itself.
        ValueError: A container type could not be rebuilt.
        RecursionError: The nesting is deeper than Python's recursion limit.
    """
    try:
        return _move(obj, device, non_blocking, _DEPTH)
    except _TooDeepError:
        # deeper than a batch: make sure it ends, then walk it again without a budget
        # (what the first walk moved is dropped; modules moved in place stay moved)
        cycle = find_cycle(obj)
        if cycle is not None:
            raise CycleFoundError(*cycle) from None
        return _move(obj, device, non_blocking, sys.maxsize)


def _move(obj: Any, device: torch.device, nb: bool | None, depth: int) -> Any:
    cls = type(obj)
    if nb is False:  # the fast path, below
        if cls is dict:
            return _dict_blocking(obj, device, depth)
        if cls is list or cls is tuple:
            return _sequence_blocking(obj, device, depth)
    if isinstance(obj, Tensor):
        if nb is False:
            return obj.to(device)
        return obj.to(device, non_blocking=obj.is_pinned() if nb is None else nb)
    if cls in _ATOMIC:
        return obj
    return _move_other(obj, device, nb, depth)


# The fast path: blocking copies through exact dicts, lists and tuples, which is what
# a DataLoader's collate returns. Plain loops that test each value's exact type inline
# (tensors, then strings, numbers and the like): a batch's small containers cost less
# this way than with a comprehension (a function call each before Python 3.12) or with
# a call per value. Anything else, tensor subclasses included, goes to `_move`.


def _dict_blocking(obj: dict[Any, Any], device: torch.device, depth: int) -> dict[Any, Any]:
    if not depth:
        raise _TooDeepError
    depth -= 1
    out = {}
    for key, value in obj.items():
        cls = type(value)
        if cls is Tensor:
            out[key] = value.to(device)
        elif cls in _ATOMIC:
            out[key] = value
        elif cls is dict:
            out[key] = _dict_blocking(value, device, depth)
        elif cls is list or cls is tuple:
            out[key] = _sequence_blocking(value, device, depth)
        else:
            out[key] = _move(value, device, False, depth)
    return out


def _sequence_blocking(obj: list[Any] | tuple[Any, ...], device: torch.device, depth: int) -> Any:
    if not depth:
        raise _TooDeepError
    depth -= 1
    out: list[Any] = []
    append = out.append
    for value in obj:
        cls = type(value)
        if cls is Tensor:
            append(value.to(device))
        elif cls in _ATOMIC:
            append(value)
        elif cls is dict:
            append(_dict_blocking(value, device, depth))
        elif cls is list or cls is tuple:
            append(_sequence_blocking(value, device, depth))
        else:
            append(_move(value, device, False, depth))
    return out if type(obj) is list else tuple(out)


def _move_other(obj: Any, device: torch.device, nb: bool | None, depth: int) -> Any:
    if isinstance(obj, Module):
        obj.to(device, non_blocking=bool(nb))  # in place, as nn.Module.to always is
        return obj
    if _has_to(obj):
        moved = obj.to(device)
        return obj if moved is None else moved  # a .to() that moves in place may return None
    kind = _container_kind(obj)
    if kind is None:
        return obj
    if not depth:
        raise _TooDeepError
    depth -= 1
    if kind == "dataclass":
        return _move_dataclass(obj, device, nb, depth)
    if kind == "mapping":
        items = {k: _move(v, device, nb, depth) for k, v in obj.items()}
        return items if type(obj) is dict else _rebuild(obj, items)
    values = [_move(v, device, nb, depth) for v in obj]
    if kind == "namedtuple":
        return type(obj)._make(values)
    if type(obj) is list:
        return values
    return tuple(values) if type(obj) is tuple else _rebuild(obj, values)


def _move_dataclass(obj: Any, device: torch.device, nb: bool | None, depth: int) -> Any:
    # A shallow copy, then every field replaced: no __init__ or __post_init__ runs again,
    # so frozen classes, init=False fields and InitVar pseudo-fields all work.
    new = copy.copy(obj)
    for field in dataclasses.fields(obj):
        try:
            value = getattr(obj, field.name)
        except AttributeError:  # an init=False field that was never set
            continue
        object.__setattr__(new, field.name, _move(value, device, nb, depth))
    state = getattr(new, "__dict__", None)
    if state is not None:  # values cached from the old tensors are stale now
        for name, attr in vars(type(obj)).items():
            if isinstance(attr, cached_property):
                state.pop(name, None)
    return new


def _rebuild(obj: Any, contents: Any) -> Any:
    cls = type(obj)
    try:
        if isinstance(obj, defaultdict):
            return cls(obj.default_factory, contents)
        return cls(contents)
    except Exception as e:
        raise ValueError(
            f"cannot rebuild a {cls.__qualname__} after moving its contents: "
            f"{cls.__qualname__}({type(contents).__name__}) raised {type(e).__name__}: {e}. "
            f"Give {cls.__qualname__} a .to(device) method that returns the moved object, "
            f"or convert it to a plain {type(contents).__name__} first."
        ) from e


def _has_to(obj: Any) -> bool:
    return not isinstance(obj, type) and callable(getattr(obj, "to", None))


def _container_kind(obj: Any, *, movable: bool = False) -> str | None:
    """What kind of container ``obj`` is, or ``None`` for a leaf (same order as ``_move``).

    An object with its own ``.to()`` is a leaf for moving; with ``movable=True`` (for
    looking, not moving) it is looked into when it is also a container.
    """
    if isinstance(obj, (Tensor, Module)) or type(obj) in _ATOMIC:
        return None
    if not movable and _has_to(obj):
        return None
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields") and hasattr(obj, "_make"):
        return "namedtuple"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return "dataclass"
    if isinstance(obj, Mapping):
        return "mapping"
    if isinstance(obj, (list, tuple)):
        return "sequence"
    return None


def _children(obj: Any, *, movable: bool = False) -> list[tuple[str, Any]]:
    """The (path suffix, value) pairs directly inside a container; empty for a leaf."""
    kind = _container_kind(obj, movable=movable)
    if kind == "mapping":
        return [(f"[{k!r}]", v) for k, v in obj.items()]
    if kind == "namedtuple":
        return [(f".{name}", v) for name, v in zip(obj._fields, obj, strict=True)]
    if kind == "sequence":
        return [(f"[{i}]", v) for i, v in enumerate(obj)]
    if kind == "dataclass":
        return [
            (f".{f.name}", getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if hasattr(obj, f.name)
        ]
    return []


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def iter_tensors(obj: Any, path: str = "") -> Iterator[tuple[str, Tensor, bool]]:
    """Yield ``(path, tensor, in_module)`` for every tensor reachable from ``obj``.

    Paths read like Python: ``['labels'][0]``, ``.field``; the parameters and buffers of
    a module met on the way are yielded under their qualified names after the module's
    path, with ``in_module`` True. Containers with their own ``.to()`` (a Hugging Face
    ``BatchEncoding``) are looked into too. Each container is visited once (iteratively:
    no depth limit, cycles are harmless).
    """
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [(path, obj)]
    while stack:
        here, value = stack.pop()
        if isinstance(value, Tensor):
            yield here, value, False
        elif isinstance(value, Module):
            if id(value) in seen:
                continue
            seen.add(id(value))
            for name, t in value.named_parameters(remove_duplicate=False):
                yield _join(here, name), t, True
            for name, b in value.named_buffers(remove_duplicate=False):
                yield _join(here, name), b, True
        else:
            inside = _children(value, movable=True)
            if not inside or id(value) in seen:
                continue
            seen.add(id(value))
            stack.extend((here + suffix, child) for suffix, child in reversed(inside))


def find_cycle(obj: Any, root: str = "obj") -> tuple[str, str] | None:
    """Find a container that contains itself, following the edges ``move_tree`` follows.

    Returns:
        ``(path, ancestor_path)``: the value at ``path`` is the very container found at
        ``ancestor_path`` on the way down; ``None`` when there is no cycle.

    Examples:
        >>> loop = {"x": [1]}
        >>> loop["x"].append(loop)
        >>> find_cycle(loop)
        ("obj['x'][1]", 'obj')
    """
    on_path: dict[int, str] = {id(obj): root}
    # each frame: (id of the container, its path, iterator over its children)
    frames: list[tuple[int, str, Iterator[tuple[str, Any]]]] = [
        (id(obj), root, iter(_children(obj)))
    ]
    while frames:
        key, here, children = frames[-1]
        step = next(children, None)
        if step is None:
            frames.pop()
            on_path.pop(key, None)
            continue
        suffix, child = step
        inside = _children(child)
        if not inside:
            continue
        if id(child) in on_path:
            return here + suffix, on_path[id(child)]
        on_path[id(child)] = here + suffix
        frames.append((id(child), here + suffix, iter(inside)))
    return None
