"""Device specs: what ``"cuda:1"``, ``"gpu"``, ``1`` or a ``torch.device`` mean, and checks.

``parse`` checks the form of a spec (no hardware is asked); ``check`` asks whether the
device is there and says, when it is not, why and what to do. ``"auto"`` is parsed here
and decided in ``torchplace._devices.choice``.

Examples:
    >>> parse(" GPU:1 ", "'gpu:1'")
    ('cuda', 1)
    >>> parse("cdua", "'cdua'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 'cdua': unknown device type 'cdua'; did you mean 'cuda'? ...
"""

from __future__ import annotations

import difflib
import numbers
import os
import sys

from torchplace._devices import nvml, probe
from torchplace._devices.build import torch_build
from torchplace._devices.discovery import no_cuda_reason, no_mps_reason, visible_text

__all__ = ["ENV_VAR", "check", "describe", "parse"]

ENV_VAR = "TORCHPLACE_DEVICE"
_TYPES = ("auto", "cpu", "cuda", "gpu", "mps", "xpu")
_VALID_TEXT = (
    "valid device types are auto, cpu, cuda (alias gpu), mps and xpu, optionally with an "
    "index such as 'cuda:1'; an int is a CUDA ordinal; a torch.device is accepted too"
)


def _unknown_type(what: str, kind: str) -> ValueError:
    close = difflib.get_close_matches(kind, _TYPES, n=1)
    guess = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(f"{what}: unknown device type {kind!r}{guess} ({_VALID_TEXT})")


def parse(spec: object, what: str) -> tuple[str, int | None]:
    """``(type, index)`` of a spec, checked for form only; ``gpu`` becomes ``cuda``.

    Args:
        spec: What the user passed.
        what: How error messages name it (see ``describe``).

    Raises:
        ValueError: The spec is malformed or names an unknown type.
    """
    torch = sys.modules.get("torch")
    if isinstance(spec, bool):
        raise ValueError(f"{what}: a bool is not a device ({_VALID_TEXT})")
    if isinstance(spec, numbers.Integral):
        if int(spec) < 0:
            raise ValueError(f"{what}: a device index must be >= 0, got {int(spec)}")
        return "cuda", int(spec)
    if torch is not None and isinstance(spec, torch.device):
        text = str(spec)
    elif isinstance(spec, str):
        text = spec.strip().lower()
    else:
        raise ValueError(
            f"{what}: expected a string, an int or a torch.device, got {type(spec).__name__}"
        )
    if not text:
        raise ValueError(f"{what}: the device is empty ({_VALID_TEXT})")
    kind, colon, index = text.partition(":")
    kind = "cuda" if kind == "gpu" else kind
    if kind not in _TYPES:
        raise _unknown_type(what, kind)
    if not colon:
        return kind, None
    if kind == "auto":
        raise ValueError(f"{what}: 'auto' takes no index; use 'auto' or e.g. 'cuda:1'")
    if index.startswith("-") and index[1:].isdecimal():
        raise ValueError(f"{what}: a device index must be >= 0, got {index}")
    if not (index.isascii() and index.isdecimal()):
        raise ValueError(
            f"{what}: the index {index!r} is not a non-negative integer; write e.g. '{kind}:0'"
        )
    return kind, int(index)


def check(kind: str, index: int | None, what: str) -> str:
    """The canonical spec (``"cuda:1"``, ``"cpu"``, ...) once the device is known to exist.

    Args:
        kind: A parsed type other than ``"auto"``.
        index: The parsed index, or ``None`` for the default device of that type.
        what: How error messages name the spec.

    Raises:
        ValueError: The index is beyond the visible devices of that type.
        RuntimeError: No device of that type can be used here (the message says why).
    """
    if kind == "cpu":
        if index not in (None, 0):
            raise ValueError(f"{what}: there is one CPU device; use 'cpu'")
        return "cpu"
    if kind == "mps":
        if not probe.mps_available():
            raise RuntimeError(f"{what} requested but MPS is not available: {no_mps_reason()}")
        if index not in (None, 0):
            raise ValueError(f"{what}: there is one MPS device; use 'mps'")
        return "mps:0"
    if kind == "xpu":
        count = probe.xpu_device_count()
        if count == 0:
            build = torch_build()
            raise RuntimeError(
                f"{what} requested but no Intel XPU is available: torch {build.version} "
                f"({build.kind} build) sees no XPU device; for Intel GPUs install an XPU build: "
                f"{probe.INSTALL_URL}"
            )
        chosen = 0 if index is None else index
        if chosen >= count:
            raise ValueError(
                f"{what} requested but {count} XPU device(s) are visible; use an index from "
                f"0 to {count - 1}"
            )
        return f"xpu:{chosen}"
    count = probe.cuda_device_count()
    if count == 0:
        raise RuntimeError(f"{what} requested but no CUDA device can be used: {no_cuda_reason()}")
    chosen = probe.cuda_current_device() if index is None else index
    if chosen >= count:
        devices_text = f"{count} CUDA device{'s are' if count != 1 else ' is'} visible"
        message = (
            f"cuda:{chosen} requested but {devices_text} ({visible_text()}); "
            f"use an index from 0 to {count - 1}"
        )
        visible = nvml.parse_visible(os.environ.get("CUDA_VISIBLE_DEVICES"))
        if visible:
            message += (
                f". torch numbers the visible devices from 0: physical GPU {visible[0]} is cuda:0"
            )
        if what.startswith(ENV_VAR):
            message = f"{what}: {message}"
        raise ValueError(message)
    return f"cuda:{chosen}"


def describe(spec: object) -> str:
    """How an error names the spec the user passed."""
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        return f"CUDA ordinal {spec}"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(spec, torch.device):
        return repr(str(spec))
    return repr(spec)
