"""Choosing a device: ``device(spec)``, and what ``"auto"`` picks and why.

Examples:
    >>> device("cpu")
    device(type='cpu')
    >>> spec, reason = auto_choice()
    >>> isinstance(reason, str)
    True
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from torchplace._devices import nvml, probe
from torchplace._devices.discovery import cuda_uuid, no_gpu_reason, try_query
from torchplace._devices.spec import ENV_VAR, check, describe, parse

if TYPE_CHECKING:
    import torch

__all__ = ["auto_choice", "device", "explain_auto"]

_GIB = 1024**3


def _most_free_cuda(count: int) -> tuple[str, str]:
    with nvml.session() as (nv, error):
        free: list[int] = []
        for i in range(count):
            props = try_query(probe.cuda_properties, i)
            handle = None if nv is None else nvml.handle_of(nv, i, cuda_uuid(props))[1]
            memory = None if handle is None else nvml.memory(nv, handle)
            if memory is not None:
                free.append(memory[0])
    if len(free) < count:
        why = error or "NVML did not report free memory for every device"
        return "cuda:0", (
            f"cuda:0 is the first of {count} visible CUDA devices; their free memory is unknown "
            f"({why}), so none could be preferred"
        )
    best = max(range(count), key=lambda i: (free[i], -i))
    others = ", ".join(f"cuda:{i} {free[i] / _GIB:.1f}" for i in range(count) if i != best)
    return f"cuda:{best}", (
        f"cuda:{best} has the most free memory of the {count} visible CUDA devices "
        f"({free[best] / _GIB:.1f} GiB free; {others} GiB)"
    )


def auto_choice() -> tuple[str, str]:
    """What ``device("auto")`` picks, as a spec string, and why, in one sentence.

    The order: ``TORCHPLACE_DEVICE`` when set (checked like any spec); else the CUDA
    device with the most free memory (NVML; the first one when NVML cannot say); else
    MPS; else the first XPU; else the CPU. On a build that cannot have an accelerator,
    or a CUDA build on a machine without the CUDA driver, this does not import torch.

    Returns:
        ``(spec, reason)``, e.g. ``("cuda:1", "cuda:1 has the most free memory ...")``.

    Raises:
        ValueError: ``TORCHPLACE_DEVICE`` is not a valid device spec.
        RuntimeError: ``TORCHPLACE_DEVICE`` names a device that is not there.

    Examples:
        >>> spec, reason = auto_choice()
        >>> spec in {"cpu", "mps:0"} or spec.startswith(("cuda:", "xpu:"))
        True
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if env and env.lower() != "auto":
        what = f"{ENV_VAR}={env!r}"
        kind, index = parse(env, what)
        return check(kind, index, what), f"{ENV_VAR}={env} overrides auto"
    count = probe.cuda_device_count()
    if count == 1:
        return "cuda:0", "cuda:0 is the only visible CUDA device"
    if count > 1:
        return _most_free_cuda(count)
    if probe.mps_available():
        return "mps:0", "no CUDA device is visible and Apple MPS is available"
    if probe.xpu_device_count():
        return "xpu:0", "no CUDA or MPS device is visible and an Intel XPU is"
    return "cpu", f"no GPU: {no_gpu_reason()}"


def explain_auto() -> tuple[torch.device, str]:
    """The device ``device("auto")`` returns and the reason for it.

    Returns:
        ``(torch.device, reason sentence)``.

    Examples:
        >>> chosen, reason = explain_auto()
        >>> chosen == device("auto") and isinstance(reason, str)
        True
    """
    import torch

    spec, reason = auto_choice()
    return torch.device(spec), reason


def device(spec: str | int | torch.device = "auto") -> torch.device:
    """A checked ``torch.device`` from a friendly spec.

    Args:
        spec: ``"auto"`` (the best accelerator, see ``auto_choice``; the environment
            variable ``TORCHPLACE_DEVICE`` overrides it), ``"cpu"``, ``"cuda"``,
            ``"cuda:1"``, ``"gpu"`` (alias of ``cuda``), ``"mps"``, ``"xpu"``, an int
            (a CUDA ordinal) or a ``torch.device``. Case and surrounding spaces do not
            matter. A bare ``"cuda"`` means the current CUDA device, with its index.

    Returns:
        The device, with an explicit index for accelerators (``cuda:0``, not ``cuda``).

    Raises:
        ValueError: The spec is malformed, names an unknown type (the message suggests
            the close one) or an index beyond the visible devices.
        RuntimeError: The requested kind of accelerator is not available here; the
            message says why (e.g. a CPU-only torch build) and what to install.

    Examples:
        >>> device("cpu")
        device(type='cpu')
        >>> device(" CPU ")
        device(type='cpu')
        >>> device("cdua")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: 'cdua': unknown device type 'cdua'; did you mean 'cuda'? ...
    """
    import torch

    what = describe(spec)
    kind, index = parse(spec, what)
    return torch.device(auto_choice()[0] if kind == "auto" else check(kind, index, what))
