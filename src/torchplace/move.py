"""Placement: put nested data on a device, see where it lives, and catch mismatches early.

- ``to(obj, device)`` moves the tensors inside dicts, lists, tuples, namedtuples,
  dataclasses and objects with ``.to()``, with a safe ``non_blocking`` policy.
- ``where(obj)`` says which devices hold what (bytes of unique storages, tensor counts,
  which name is where), for a tensor, a module or a collection.
- ``check_same_device(model, *args, **kwargs)`` raises ``DeviceMismatchError`` before
  PyTorch would, naming every parameter, buffer, unregistered tensor attribute and
  input that is on the wrong device, and the fix; ``guard_same_device(model)`` runs
  that check before every forward.

Examples:
    >>> import torch
    >>> from torchplace.move import to, where
    >>> batch = {"x": torch.ones(2, 3), "labels": [torch.zeros(2)], "ids": ["a", "b"]}
    >>> moved = to(batch, "meta")
    >>> moved["x"].device, moved["labels"][0].device, moved["ids"]
    (device(type='meta'), device(type='meta'), ['a', 'b'])
    >>> where(batch).bytes_per_device
    {'cpu': 32}
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module, Parameter
from torch.utils.hooks import RemovableHandle

from torchplace._tree import CycleFoundError, find_cycle, iter_tensors, move_tree

__all__ = [
    "DeviceMismatchError",
    "Placement",
    "check_same_device",
    "guard_same_device",
    "to",
    "where",
]

_GIB = 1024**3
# Device types that a copy must never be non-blocking towards: the host (a non-blocking
# device-to-host copy returns before the data is there) and MPS (pytorch#83015, a race).
_BLOCKING_TYPES = frozenset({"cpu", "mps"})
# Targets that the default policy copies to blocking without asking each tensor.
_HOST_TYPES = frozenset({"cpu", "mps", "meta"})
# The default policy per target device, filled on first use (see `to`).
_DEFAULT_POLICY: dict[torch.device, bool | None] = {}
_UNKNOWN: Any = object()
_LISTED = 10  # names shown per kind of offender before "... and N more"


# ---------------------------------------------------------------------------- to


def _parse_device(device: Any) -> torch.device:
    if isinstance(device, torch.device):
        return device
    if isinstance(device, (str, int)) and not isinstance(device, bool):
        try:
            return torch.device(device)
        except (RuntimeError, TypeError, ValueError) as e:
            reason = str(e).splitlines()[0].rstrip(" .")
            raise ValueError(
                f"{device!r} is not a device torch can use here: {reason}. "
                "Pass a name such as 'cpu', 'cuda', 'cuda:1', 'mps' or 'meta', "
                "or a torch.device."
            ) from e
    raise ValueError(
        f"device must be a str, an int or a torch.device, not {type(device).__name__} "
        f"({device!r}). Pass a name such as 'cpu' or 'cuda:0', or a torch.device."
    )


def _non_blocking_policy(device: torch.device, non_blocking: bool | None) -> bool | None:
    """``True``/``False`` for every copy, or ``None``: decide per tensor (pinned source)."""
    if non_blocking is None:
        return False if device.type in _HOST_TYPES else None
    if not isinstance(non_blocking, bool):
        raise ValueError(
            f"non_blocking must be True, False or None (the safe policy), not {non_blocking!r}."
        )
    if non_blocking and device.type in _BLOCKING_TYPES:
        warnings.warn(
            f"non_blocking=True towards {device.type} was turned into a blocking copy: "
            "a non-blocking copy to the host returns before the data has arrived, so code "
            "that reads the result at once can see zeros or stale values (Lightning "
            "#11287 saw zeros in predictions, InvokeAI #6624 got black images)"
            + (", and MPS has a race with it (pytorch#83015)" if device.type == "mps" else "")
            + ". Leave non_blocking unset for the safe policy: non-blocking only "
            "from pinned host memory to an accelerator.",
            UserWarning,
            stacklevel=3,
        )
        return False
    return non_blocking


def _cycle_error(target: torch.device, path: str, ancestor: str) -> ValueError:
    return ValueError(
        f"cannot move obj to {target}: it contains itself ({path} is {ancestor} again), "
        "so it has no end to walk. Break the cycle before calling torchplace.to, or "
        "give the object a .to(device) method that moves what it holds."
    )


def to(obj: Any, device: str | int | torch.device, *, non_blocking: bool | None = None) -> Any:
    """Move every tensor inside ``obj`` to ``device``, keeping the structure.

    Containers are rebuilt with their own types: dict, ``OrderedDict``, ``defaultdict``
    (with its ``default_factory``), other mappings, list, tuple, namedtuple, and
    dataclasses (frozen ones and ``init=False`` fields included; no ``__init__`` runs
    again). Any object with a ``.to()`` method is moved by it; an ``nn.Module`` moves in
    place and is returned. Strings, bytes, numbers, ``None`` and other objects pass
    through untouched. A tensor already on ``device`` is returned as is (no copy).

    The default ``non_blocking=None`` is the safe policy: a copy is non-blocking only
    from pinned host memory to an accelerator, never towards CPU or MPS. An explicit
    ``non_blocking=True`` towards CPU or MPS is made blocking, with a warning (a
    non-blocking copy to the host can be read before it lands: Lightning #11287 saw
    zeros, InvokeAI #6624 saw black images).

    Args:
        obj: A tensor, a module, an object with ``.to()``, or nested containers of them.
        device: Anything ``torch.device()`` accepts (``"cuda:1"``, ``"cpu"``, ``0``), or
            a ``torch.device``.
        non_blocking: ``None`` for the safe policy, or ``True``/``False`` for every copy.

    Returns:
        The same structure with every tensor on ``device``.

    Raises:
        ValueError: ``device`` or ``non_blocking`` is not valid, ``obj`` contains itself,
            or a container type cannot be rebuilt.
        RuntimeError: The copy itself failed (the device is not available here, or a
            ``meta`` tensor has no data to copy). ``torch.OutOfMemoryError`` is raised
            as is.

    Examples:
        >>> import torch
        >>> from collections import defaultdict
        >>> batch = defaultdict(list, x=torch.ones(2), tags=("a", None))
        >>> moved = to(batch, "meta")
        >>> type(moved).__name__, moved.default_factory, moved["x"].device, moved["tags"]
        ('defaultdict', <class 'list'>, device(type='meta'), ('a', None))
        >>> t = torch.ones(2)
        >>> to(t, "cpu") is t  # already there: the same tensor, no copy
        True
    """
    target = device if device.__class__ is torch.device else _parse_device(device)
    if non_blocking is None:
        # cached per device: reading torch.device.type costs more than a dict lookup
        nb = _DEFAULT_POLICY.get(target, _UNKNOWN)
        if nb is _UNKNOWN:
            nb = _DEFAULT_POLICY[target] = _non_blocking_policy(target, None)
    else:
        nb = _non_blocking_policy(target, non_blocking)
    try:
        return move_tree(obj, target, nb)
    except CycleFoundError as e:
        raise _cycle_error(target, e.path, e.ancestor) from None
    except RecursionError as e:
        raise ValueError(
            f"cannot move obj to {target}: it is nested deeper than Python's recursion "
            "limit allows. Flatten the structure, or give its outer object a .to(device) "
            "method."
        ) from e
    except torch.OutOfMemoryError:
        cycle = find_cycle(obj)  # copies of a cyclic structure can fill memory first
        if cycle is not None:
            raise _cycle_error(target, *cycle) from None
        raise
    except (RuntimeError, AssertionError) as e:
        reason = (str(e).splitlines() or [""])[0].rstrip(" .!")
        if "meta" in reason.lower():
            advice = (
                "Meta tensors hold no data to copy: create the module on the target with "
                "module.to_empty(device=...) and load the weights"
            )
        else:
            advice = (
                f"Check that {target} exists on this machine (torchplace info lists the "
                "devices), or pick another device"
            )
        raise RuntimeError(
            f"could not move obj to {target}: {type(e).__name__}: {reason}. {advice}."
        ) from e


# ------------------------------------------------------------------------- where


def _storage_identity(t: Tensor) -> tuple[tuple[str, str, int], int]:
    """A key shared by every tensor that views the same memory, and that memory's bytes."""
    device = str(t.device)
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, ...
        return (device, "tensor", id(t)), t.numel() * t.element_size()
    ptr = 0
    # meta and fake tensors (subclasses) have no data pointer; their StorageImpl is the key
    if t.device.type != "meta" and type(t) in (Tensor, Parameter):
        ptr = storage.data_ptr()
    if ptr:
        return (device, "ptr", ptr), storage.nbytes()
    return (device, "impl", int(storage._cdata)), storage.nbytes()


def _bytes_per_device(tensors: Iterable[Tensor]) -> dict[str, int]:
    seen: set[tuple[str, str, int]] = set()
    out: dict[str, int] = {}
    for t in tensors:
        key, nbytes = _storage_identity(t)
        out.setdefault(key[0], 0)
        if key not in seen:
            seen.add(key)
            out[key[0]] += nbytes
    return out


@dataclass(frozen=True)
class Placement:
    """Which devices hold the tensors of an object, as returned by ``where``.

    Attributes:
        bytes_per_device: Bytes held per device (``"cuda:0"``, ``"cpu"``), counting
            each storage once: views and shared (tied) weights are not counted twice.
        count_per_device: How many named tensors sit on each device.
        device_of: Each tensor's name and its device: qualified names for a module's
            parameters and buffers (``"encoder.weight"``), paths for a collection
            (``"['labels'][0]"``), ``"tensor"`` for a single tensor.
        mixed: The tensors (a module's parameters and buffers) are on more than one
            device.

    Examples:
        >>> import torch
        >>> p = where({"x": torch.ones(4), "m": torch.ones(2, device="meta")})
        >>> p.mixed, p.devices
        (True, ['cpu', 'meta'])
        >>> p.to_dict()["devices"]["cpu"]
        {'tensors': 1, 'bytes': 16}
    """

    bytes_per_device: dict[str, int] = field(default_factory=dict)
    count_per_device: dict[str, int] = field(default_factory=dict)
    device_of: dict[str, str] = field(default_factory=dict)
    mixed: bool = False

    @property
    def devices(self) -> list[str]:
        """The devices holding tensors, most bytes first."""
        return sorted(self.count_per_device, key=lambda d: (-self.bytes_per_device.get(d, 0), d))

    @property
    def total_bytes(self) -> int:
        """Bytes held on all devices together (unique storages)."""
        return sum(self.bytes_per_device.values())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary: per-device tensors and bytes, each name's device."""
        return {
            "devices": {
                d: {"tensors": self.count_per_device[d], "bytes": self.bytes_per_device.get(d, 0)}
                for d in self.devices
            },
            "tensors": dict(self.device_of),
            "total_bytes": self.total_bytes,
            "mixed": self.mixed,
        }

    def __str__(self) -> str:
        if not self.device_of:
            return "no tensors"
        rows = [("device", "tensors", "bytes", "GiB")]
        for d in self.devices:
            b = self.bytes_per_device.get(d, 0)
            rows.append((d, str(self.count_per_device[d]), f"{b:,}", f"{b / _GIB:.3f}"))
        if len(self.devices) > 1:
            total = self.total_bytes
            rows.append(("total", str(len(self.device_of)), f"{total:,}", f"{total / _GIB:.3f}"))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = [
            "  ".join(
                [r[0].ljust(widths[0])]
                + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
            )
            for r in rows
        ]
        if self.mixed:
            main = self.devices[0]
            elsewhere = [f"{n} ({d})" for n, d in self.device_of.items() if d != main]
            shown = ", ".join(elsewhere[:_LISTED])
            more = f" and {len(elsewhere) - _LISTED} more" if len(elsewhere) > _LISTED else ""
            lines.append(
                f"mixed: tensors on {len(self.devices)} devices; not on {main}: {shown}{more}"
            )
        return "\n".join(lines)


def where(obj: Any) -> Placement:
    """Say which devices hold the tensors of ``obj``, and how many bytes each.

    Args:
        obj: A tensor; an ``nn.Module`` (its parameters and buffers, by qualified
            name); or a collection that ``to`` walks (dict, list, tuple, namedtuple,
            dataclass), modules inside it included.

    Returns:
        A ``Placement``: bytes (unique storages) and tensor counts per device, each
        tensor's device by name, and whether more than one device is involved.

    Examples:
        >>> import torch
        >>> model = torch.nn.Linear(2, 2)
        >>> model.bias = torch.nn.Parameter(torch.zeros(2, device="meta"))
        >>> p = where(model)
        >>> p.device_of, p.mixed
        ({'weight': 'cpu', 'bias': 'meta'}, True)
        >>> print(p)
        device  tensors  bytes    GiB
        cpu           1     16  0.000
        meta          1      8  0.000
        total         2     24  0.000
        mixed: tensors on 2 devices; not on cpu: bias (meta)
    """
    root = "tensor" if isinstance(obj, Tensor) else ""
    named = [(name, t) for name, t, _ in iter_tensors(obj, root)]
    counts: dict[str, int] = {}
    device_of: dict[str, str] = {}
    for name, t in named:
        d = str(t.device)
        device_of[name] = d
        counts[d] = counts.get(d, 0) + 1
    return Placement(
        bytes_per_device=_bytes_per_device(t for _, t in named),
        count_per_device=counts,
        device_of=device_of,
        mixed=len(counts) > 1,
    )


# ------------------------------------------------------------- same-device check


class DeviceMismatchError(RuntimeError):
    """Tensors that one forward pass would combine are on different devices.

    Raised by ``check_same_device`` (and the ``guard_same_device`` hook) before PyTorch
    fails with "Expected all tensors to be on the same device".

    Attributes:
        expected: The device every tensor should be on.
        offenders: The names of the tensors that are not: parameters and buffers by
            qualified name, attributes by ``submodule.attr``, inputs as
            ``args[0]['labels']`` or ``kwargs['mask']``.
        hint: What to do, in one line.
    """

    def __init__(
        self, message: str, *, expected: torch.device, offenders: tuple[str, ...], hint: str
    ) -> None:
        super().__init__(message)
        self.expected = expected
        self.offenders = offenders
        self.hint = hint


@cache
def _module_internals() -> frozenset[str]:
    """Attribute names every nn.Module has (its registries and hooks), not user tensors."""
    return frozenset(vars(Module()))


def _is_on(t: Tensor, expected: torch.device) -> bool:
    d = t.device
    if d == expected:
        return True
    if expected.index is None and d.type == expected.type:
        return True
    return d.type == "cpu" and t.dim() == 0  # a 0-dim CPU tensor mixes with any device


def _most_bytes(tensors: list[Tensor]) -> torch.device | None:
    per = _bytes_per_device(tensors)
    if not per:
        return None
    best = max(per, key=lambda d: per[d])  # the first device met wins a tie
    return torch.device(best)


def _attribute_tensors(module: Module) -> Iterable[tuple[str, Tensor, bool, str]]:
    """Tensors held by submodules outside their parameters and buffers.

    Yields ``(name, tensor, in_plain_container_module, owner_class)``: the tensor is a
    plain attribute (or inside a list/dict attribute), or it belongs to a module kept
    in a plain list or dict, which ``model.to()`` does not see either.
    """
    internals = _module_internals()
    for qual, sub in module.named_modules():
        for attr, value in vars(sub).items():
            if attr in internals or attr in sub._parameters or attr in sub._buffers:
                continue
            if isinstance(value, Module):
                continue  # registered in _modules already, or a deliberate back-reference
            for name, t, in_module in iter_tensors(value, f"{qual}.{attr}" if qual else attr):
                yield name, t, in_module, type(sub).__name__


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def _attribute_fix(names: list[str], owners: dict[str, str]) -> str:
    attr = names[0].rsplit(".", 1)[-1]
    owner = owners[names[0]]
    others = " (likewise for the others)" if len(names) > 1 else ""
    if "[" in attr:  # a tensor inside a list or dict attribute
        return (
            "tensors kept in a plain list or dict attribute are not registered, so "
            f"model.to() leaves them behind: in {owner}.__init__ register each one with "
            f'self.register_buffer("name", tensor){others}'
        )
    return (
        "a plain tensor attribute is not a registered buffer, so model.to() leaves it "
        f'behind: in {owner}.__init__ write self.register_buffer("{attr}", tensor) instead '
        f"of self.{attr} = tensor{others} (persistent=False keeps it out of the state_dict)"
    )


def _check(
    module: Module, args: tuple[Any, ...], kwargs: dict[str, Any], device: torch.device | None
) -> None:
    if not isinstance(module, Module):
        raise ValueError(
            f"check_same_device needs the nn.Module that will run, not "
            f"{type(module).__name__}; call it as check_same_device(model, *args, **kwargs)."
        )
    params: list[tuple[str, Tensor]] = list(module.named_parameters(remove_duplicate=False))
    buffers: list[tuple[str, Tensor]] = list(module.named_buffers(remove_duplicate=False))
    inputs = [(n, t) for n, t, _ in iter_tensors(args, "args")]
    inputs += [(n, t) for n, t, _ in iter_tensors(kwargs, "kwargs")]
    attributes = list(_attribute_tensors(module))
    if device is None:
        # the common case, answered without counting bytes: everything on one device
        seen = {
            t.device
            for group in (params, buffers, inputs)
            for _, t in group
            if t.dim() or t.device.type != "cpu"
        }
        seen.update(t.device for _, t, _, _ in attributes if t.dim() or t.device.type != "cpu")
        if len(seen) <= 1:
            return

    expected, why = device, "the device asked for"
    for source, what in ((params, "parameter"), (buffers, "buffer"), (inputs, "input")):
        if expected is None:
            expected = _most_bytes([t for _, t in source])
            why = f"the device that holds most of its {what} bytes"
    if expected is None:
        return  # no tensors anywhere: nothing can mismatch

    target = f'"{expected}"'
    move_model = f"model.to({target}) moves every parameter and buffer"
    # (singular, plural, named tensors, fix)
    groups: list[tuple[str, str, list[tuple[str, Tensor]], str]] = [
        ("parameter", "parameters", params, move_model),
        ("buffer", "buffers", buffers, move_model),
    ]
    owners = {n: owner for n, _, _, owner in attributes}
    plain = [(n, t) for n, t, in_module, _ in attributes if not in_module]
    wrong_plain = [n for n, t in plain if not _is_on(t, expected)]
    if wrong_plain:
        fix = _attribute_fix(wrong_plain, owners)
        groups.append(("attribute", "attributes", plain, fix))
    unregistered = [(n, t) for n, t, in_module, _ in attributes if in_module]
    groups.append(
        (
            "tensor of an unregistered module",
            "tensors of unregistered modules",
            unregistered,
            "a module kept in a plain list or dict is not registered, so model.to() does "
            "not move it: hold it in nn.ModuleList or nn.ModuleDict",
        )
    )
    fix = f"torchplace.to(batch, {target}) before calling the model"
    groups.append(("input", "inputs", inputs, fix))

    lines: list[str] = []
    offenders: list[str] = []
    for singular, plural, named, fix in groups:
        wrong = [(n, str(t.device)) for n, t in named if not _is_on(t, expected)]
        if not wrong:
            continue
        offenders += [n for n, _ in wrong]
        by_device: dict[str, list[str]] = {}
        for n, d in wrong:
            by_device.setdefault(d, []).append(n)
        for d, names in by_device.items():
            label = singular if len(names) == 1 else plural
            lines.append(f"  {label} on {d}: {_listing(names)}")
        lines.append(f"    fix: {fix}")
    if not offenders:
        return
    name = type(module).__name__
    count = "1 tensor is" if len(offenders) == 1 else f"{len(offenders)} tensors are"
    message = (
        f"{name} would fail with 'Expected all tensors to be on the same device': "
        f"{count} not on {expected} ({why}):\n" + "\n".join(lines)
    )
    hint = (
        f'put everything on one device: model.to("{expected}") for the model, '
        f'torchplace.to(batch, "{expected}") for the inputs, register_buffer for '
        "tensor attributes"
    )
    raise DeviceMismatchError(message, expected=expected, offenders=tuple(offenders), hint=hint)


def check_same_device(
    module: Module, /, *args: Any, device: str | int | torch.device | None = None, **kwargs: Any
) -> None:
    """Raise ``DeviceMismatchError`` if ``module(*args, **kwargs)`` would mix devices.

    Looks at the parameters and buffers (by qualified name), the plain tensor attributes
    of every submodule that are not registered buffers (the most common cause of
    "Expected all tensors to be on the same device": ``model.to()`` leaves them
    behind), modules kept in plain lists or dicts, and the inputs (``args[0]``,
    ``kwargs['mask']``, nested: ``args[0]['labels']``). Every offender is named, with
    the fix. 0-dim CPU tensors are allowed anywhere, as CUDA allows them. A model spread
    over devices on purpose (pipeline stages, ``device_map``) is not what this checks.

    Args:
        module: The model about to run.
        *args: The positional inputs of the call.
        device: The device everything should be on; by default the device that holds
            the most parameter bytes (buffer bytes, then input bytes, if it has none).
        **kwargs: The keyword inputs of the call (a forward keyword named ``device``
            cannot be passed here; ``guard_same_device`` has no such limit).

    Raises:
        DeviceMismatchError: Some tensor is not on the expected device.
        ValueError: ``module`` is not an ``nn.Module`` or ``device`` is not a device.

    Examples:
        >>> import torch
        >>> model = torch.nn.Linear(3, 2)
        >>> check_same_device(model, torch.ones(4, 3))  # all on cpu: no error
        >>> try:  # doctest: +NORMALIZE_WHITESPACE
        ...     check_same_device(model, {"x": torch.ones(4, 3, device="meta")})
        ... except DeviceMismatchError as e:
        ...     print(e)
        Linear would fail with 'Expected all tensors to be on the same device': 1 tensor is
        not on cpu (the device that holds most of its parameter bytes):
          input on meta: args[0]['x']
            fix: torchplace.to(batch, "cpu") before calling the model
    """
    _check(module, args, kwargs, None if device is None else _parse_device(device))


def guard_same_device(
    module: Module, *, device: str | int | torch.device | None = None
) -> RemovableHandle:
    """Check devices before every forward of ``module``: an opt-in guard.

    Registers a forward pre-hook that runs ``check_same_device`` on the module and the
    call's inputs, so a mismatch is named before PyTorch fails deep inside an operator.
    It costs a walk over the parameters per call: use it to debug, then remove it.

    Args:
        module: The model to guard.
        device: The expected device; by default the one holding most parameter bytes.

    Returns:
        The hook's handle: ``handle.remove()`` takes the guard off.

    Examples:
        >>> import torch
        >>> model = torch.nn.Linear(3, 2)
        >>> handle = guard_same_device(model)
        >>> try:
        ...     model(torch.ones(1, 3, device="meta"))
        ... except DeviceMismatchError as e:
        ...     print(e.offenders, "not on", e.expected)
        ('args[0]',) not on cpu
        >>> handle.remove()
    """
    if not isinstance(module, Module):
        raise ValueError(f"guard_same_device needs an nn.Module, not {type(module).__name__}.")
    expected = None if device is None else _parse_device(device)

    def _pre_forward(mod: Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        _check(mod, args, kwargs, expected)

    return module.register_forward_pre_hook(_pre_forward, with_kwargs=True)
