"""Training precision: which precisions a device can do, its autocast and its GradScaler.

Three precisions, named as Lightning Fabric names them:

- ``"32"``: plain float32, no autocast.
- ``"bf16-mixed"``: float32 weights, matrix multiplications and convolutions in bfloat16
  under :func:`torch.autocast`. bfloat16 has float32's range, so no loss scaling is needed.
  Runs on the CPU and on NVIDIA GPUs of compute capability 8.0 (Ampere) and newer, where
  it is fast; older GPUs have no bfloat16 tensor cores.
- ``"16-mixed"``: float32 weights, float16 under autocast, and a
  :class:`torch.amp.GradScaler` that scales the loss so small gradients do not underflow
  float16's narrow range. For CUDA GPUs.

A precision the device cannot do is a ``ValueError`` that says what to use instead
(Accelerate raises too: "fp16 mixed precision requires a GPU"). The one exception is a
device chosen automatically: a script written for a GPU that asks for ``"16-mixed"`` and
lands on the CPU because the machine has no GPU (a laptop, a CI runner) runs in
``"bf16-mixed"`` with a warning that says so, which is what Lightning Fabric does for
every ``"16-mixed"`` on a CPU. The user did not choose the CPU, so an error would only
punish the fallback; when the user names the device, the contradiction is theirs to fix.

Examples:
    >>> import torch
    >>> from torchplace.runner import resolve_precision
    >>> p = resolve_precision("bf16-mixed", torch.device("cpu"))
    >>> p.name, p.dtype, p.grad_scaler()
    ('bf16-mixed', torch.bfloat16, None)
    >>> resolve_precision("16-mixed", torch.device("cpu"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: precision '16-mixed' (float16 autocast with a GradScaler) needs a CUDA GPU, ...
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import torch

__all__ = ["PRECISIONS", "Precision", "resolve_precision"]

PRECISIONS: tuple[str, ...] = ("32", "bf16-mixed", "16-mixed")

# accepted spellings -> canonical name
_ALIASES: dict[str, str] = {
    "32": "32",
    "32-true": "32",
    "fp32": "32",
    "bf16-mixed": "bf16-mixed",
    "bf16": "bf16-mixed",
    "16-mixed": "16-mixed",
    "16": "16-mixed",
    "fp16": "16-mixed",
}

_AUTOCAST_DTYPE: dict[str, torch.dtype | None] = {
    "32": None,
    "bf16-mixed": torch.bfloat16,
    "16-mixed": torch.float16,
}

# bf16 tensor cores arrived with Ampere (sm_80)
_BF16_MIN_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Precision:
    """A precision resolved for one device.

    Attributes:
        name: ``"32"``, ``"bf16-mixed"`` or ``"16-mixed"``.
        device: the device it runs on.
        dtype: the autocast dtype, ``None`` for ``"32"``.
    """

    name: str
    device: torch.device
    dtype: torch.dtype | None

    @property
    def scaled(self) -> bool:
        """Whether the loss is scaled (``"16-mixed"``)."""
        return self.name == "16-mixed"

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        """The autocast context for the forward pass: ``torch.autocast`` or a no-op for "32".

        Examples:
            >>> import torch
            >>> p = resolve_precision("bf16-mixed", torch.device("cpu"))
            >>> with p.autocast():
            ...     y = torch.nn.Linear(4, 4)(torch.ones(2, 4))
            >>> y.dtype
            torch.bfloat16
        """
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def grad_scaler(self) -> torch.amp.GradScaler | None:
        """A new :class:`torch.amp.GradScaler` for ``"16-mixed"``, ``None`` otherwise."""
        if not self.scaled:
            return None
        return torch.amp.GradScaler(self.device.type)


def resolve_precision(
    precision: str | int, device: torch.device, *, auto: bool = False
) -> Precision:
    """Check that ``device`` can train in ``precision`` and return the resolved precision.

    Args:
        precision: ``"32"``, ``"bf16-mixed"`` or ``"16-mixed"`` (also accepted: ``32``,
            ``"32-true"``, ``"bf16"``, ``16``, ``"16"``, ``"fp16"``).
        device: the device the model trains on.
        auto: ``True`` when ``device`` was chosen automatically; then ``"16-mixed"`` on a
            CPU becomes ``"bf16-mixed"`` with a warning instead of an error.

    Returns:
        The precision, with its autocast dtype.

    Raises:
        ValueError: the precision is unknown, or the device cannot do it (the message
            names the precision to use instead).

    Examples:
        >>> import torch
        >>> resolve_precision(32, torch.device("cpu")).name
        '32'
        >>> resolve_precision("fp64", torch.device("cpu"))
        Traceback (most recent call last):
        ...
        ValueError: unknown precision 'fp64': use one of '32', 'bf16-mixed', '16-mixed'.
    """
    name = _ALIASES.get(str(precision).lower())
    if name is None:
        choices = ", ".join(repr(p) for p in PRECISIONS)
        raise ValueError(f"unknown precision {precision!r}: use one of {choices}.")
    if name == "16-mixed" and device.type != "cuda":
        if device.type == "cpu" and auto:
            warnings.warn(
                "precision '16-mixed' needs a CUDA GPU and none is visible, so this run on "
                "the CPU uses 'bf16-mixed' instead (bfloat16 autocast, no loss scaling). "
                "Pass precision='bf16-mixed' or '32' to silence this warning.",
                UserWarning,
                stacklevel=3,
            )
            name = "bf16-mixed"
        else:
            instead = "'bf16-mixed' (bfloat16 autocast) or '32'" if device.type == "cpu" else "'32'"
            raise ValueError(
                f"precision '16-mixed' (float16 autocast with a GradScaler) needs a CUDA GPU, "
                f"but the device is {device}: use precision={instead} there."
            )
    if name == "bf16-mixed":
        _check_bf16(device)
    return Precision(name=name, device=device, dtype=_AUTOCAST_DTYPE[name])


def _check_bf16(device: torch.device) -> None:
    if device.type == "cuda":
        if _is_rocm():
            return  # every ROCm GPU PyTorch supports does bfloat16
        index = device.index if device.index is not None else 0
        capability = _cuda_capability(index)
        if capability < _BF16_MIN_CAPABILITY:
            major, minor = capability
            raise ValueError(
                f"precision 'bf16-mixed' needs a GPU of compute capability 8.0 (Ampere) or "
                f"newer, but {device} ({_cuda_name(index)}) has {major}.{minor}: use "
                f"precision='16-mixed' (float16 with a GradScaler) or '32' on this GPU."
            )
    elif device.type != "cpu" and not torch.amp.autocast_mode.is_autocast_available(device.type):
        raise ValueError(
            f"precision 'bf16-mixed' needs autocast, which PyTorch {torch.__version__} does "
            f"not have for {device.type!r} devices: use precision='32' on {device}."
        )


# --- seams: one hardware query each (tests patch these) ---------------------------------


def _is_rocm() -> bool:
    return torch.version.hip is not None


def _cuda_capability(index: int) -> tuple[int, int]:
    major, minor = torch.cuda.get_device_capability(index)
    return (major, minor)


def _cuda_name(index: int) -> str:
    return torch.cuda.get_device_name(index)
