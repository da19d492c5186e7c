"""The training runner: device, precision, DDP and data movement around the user's own loop."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Literal, TypeVar, overload

import torch
import torch.distributed as dist
from torch import nn
from torch.optim import Optimizer

from torchplace._devices import device as _resolve_device
from torchplace._devices import explain_auto as _explain_auto
from torchplace.move import check_same_device as _check_same_device
from torchplace.move import to as _move_to
from torchplace.runner import _distributed
from torchplace.runner._loader import DeviceLoader, _prepare
from torchplace.runner.precision import Precision, resolve_precision

__all__ = ["Runner"]

_O = TypeVar("_O", bound=Optimizer)
_Op = Literal["mean", "sum", "max", "min"]

_OPS: dict[str, dist.ReduceOp.RedOpType] = {
    "sum": dist.ReduceOp.SUM,
    "mean": dist.ReduceOp.SUM,  # divided by the world size afterwards (AVG is NCCL-only)
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
}


class Runner:
    """Device, precision, DDP and batches for a training loop you keep writing yourself.

    One process, one device. Started by ``torchplace run`` (torchrun), each process gets
    its own GPU (``LOCAL_RANK`` -> ``cuda:LOCAL_RANK``) or the CPU when there is none,
    joins the process group (NCCL on GPUs, gloo on CPUs) and trains its own copy of the
    model under DistributedDataParallel. Alone, it trains on ``device``.

    Args:
        device: ``"auto"`` (the best device; under torchrun, this process's GPU), or any
            spec :func:`torchplace.device` takes: ``"cpu"``, ``"cuda"``, ``"cuda:1"``,
            ``1``, a ``torch.device``. Under torchrun, ``"cuda"`` also means this
            process's GPU.
        precision: ``"32"``, ``"bf16-mixed"`` or ``"16-mixed"`` (see
            :mod:`torchplace.runner.precision`).
        backend: the process group backend; default NCCL for GPUs, gloo for the CPU.

    Raises:
        ValueError: a malformed device spec, or a precision the device cannot do (the
            message says which to use).
        RuntimeError: the device is not available here, or the job's process group
            cannot be joined (the message says why and what to do).

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from torchplace import Runner
        >>> with Runner("cpu") as runner:
        ...     model = nn.Linear(4, 2)
        ...     opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ...     model, opt = runner.setup(model, opt)
        ...     x, y = runner.to((torch.ones(8, 4), torch.zeros(8, dtype=torch.long)))
        ...     with runner.autocast():
        ...         loss = nn.functional.cross_entropy(model(x), y)
        ...     runner.backward(loss)
        ...     runner.step(opt)
        ...     (runner.device, runner.rank, runner.world_size, runner.is_main)
        (device(type='cpu'), 0, 1, True)
    """

    def __init__(
        self,
        device: str | int | torch.device = "auto",
        *,
        precision: str | int = "32",
        backend: str | None = None,
    ) -> None:
        place = _distributed._place()
        self._rank = place.rank
        self._local_rank = place.local_rank
        self._world_size = place.world_size
        self._device, self._reason = _choose_device(device, place)
        auto = isinstance(device, str) and device == "auto"
        self._precision: Precision = resolve_precision(precision, self._device, auto=auto)
        self._scaler = self._precision.grad_scaler()
        self._owns_group = False
        if self._world_size > 1 and not _distributed._group_ready():
            backend = backend or ("nccl" if self._device.type == "cuda" else "gloo")
            _distributed._start_group(backend, self._device, place)
            self._owns_group = True

    # --- where this process stands ---------------------------------------------------

    @property
    def device(self) -> torch.device:
        """This process's device."""
        return self._device

    @property
    def device_reason(self) -> str:
        """Why this device: one sentence for people."""
        return self._reason

    @property
    def precision(self) -> str:
        """``"32"``, ``"bf16-mixed"`` or ``"16-mixed"``."""
        return self._precision.name

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """The GradScaler of ``"16-mixed"`` (save it in checkpoints), else ``None``."""
        return self._scaler

    @property
    def rank(self) -> int:
        """This process's rank in the job, 0 to ``world_size - 1``."""
        return self._rank

    @property
    def local_rank(self) -> int:
        """This process's rank on its machine (``LOCAL_RANK``)."""
        return self._local_rank

    @property
    def world_size(self) -> int:
        """How many processes train together (1 when alone)."""
        return self._world_size

    @property
    def is_main(self) -> bool:
        """True on rank 0: the process that prints, logs and writes files."""
        return self._rank == 0

    # --- model, optimizers and data ----------------------------------------------------

    @overload
    def setup(self, model: nn.Module, /) -> nn.Module: ...

    @overload
    def setup(self, model: nn.Module, optimizer: _O, /) -> tuple[nn.Module, _O]: ...

    @overload
    def setup(
        self, model: nn.Module, optimizer: Optimizer, /, *optimizers: Optimizer
    ) -> tuple[Any, ...]: ...

    def setup(self, model: nn.Module, /, *optimizers: Optimizer) -> Any:
        """Move the model to the device, check it, and wrap it in DDP in a job.

        Args:
            model: the model, all on one device (or the CPU).
            *optimizers: optimizers over its parameters; any state they already hold
                follows the parameters to the device.

        Returns:
            The model (a DistributedDataParallel wrapper when ``world_size > 1``) when no
            optimizer is given, else a tuple ``(model, *optimizers)``.

        Raises:
            ValueError: not an ``nn.Module``, already wrapped, on the meta device, or
                spread over several devices.
            torchplace.DeviceMismatchError: a tensor the model uses stays elsewhere after
                the move (e.g. a tensor attribute that is not a registered buffer).
        """
        _check_model(model)
        for i, opt in enumerate(optimizers):
            if not isinstance(opt, Optimizer):
                raise ValueError(
                    f"setup() takes the model and then optimizers, but argument {i + 2} is a "
                    f"{type(opt).__name__}: pass torch.optim.Optimizer objects."
                )
        _move_to(model, self._device)
        for opt in optimizers:
            if opt.state:  # re-cast existing state (e.g. loaded) onto its parameters' device
                opt.load_state_dict(opt.state_dict())
        _check_same_device(model, device=self._device)
        if self._world_size > 1:
            ids = [self._device.index] if self._device.type == "cuda" else None
            model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        return model if not optimizers else (model, *optimizers)

    def loader(self, dataloader: Iterable[Any]) -> DeviceLoader:
        """This process's batches, on its device.

        In a job of several processes a DataLoader is rebuilt with a DistributedSampler
        (its shuffle, seed, batch size, workers and collate function kept); its
        ``set_epoch`` is called at every pass. On CUDA the batches are pinned and the next
        one is copied on a side stream while the current one is used.

        Args:
            dataloader: a DataLoader (or, alone, any iterable of batches).

        Returns:
            An iterable of batches on :attr:`device`; each pass is one epoch.

        Examples:
            >>> import torch
            >>> from torch.utils.data import DataLoader, TensorDataset
            >>> runner = Runner("cpu")
            >>> data = DataLoader(TensorDataset(torch.ones(10, 3)), batch_size=4)
            >>> [batch[0].device.type for batch in runner.loader(data)]
            ['cpu', 'cpu', 'cpu']
        """
        prepared = _prepare(
            dataloader,
            rank=self._rank,
            world_size=self._world_size,
            pin_memory=self._device.type == "cuda",
        )
        return DeviceLoader(prepared, self._device)

    def to(self, data: Any) -> Any:
        """Move tensors, nested containers and modules to the device (safe non-blocking)."""
        return _move_to(data, self._device)

    # --- the training step ------------------------------------------------------------

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        """The precision's autocast context; wrap the forward pass and the loss in it."""
        return self._precision.autocast()

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, with the loss scaled first under ``"16-mixed"``."""
        if self._scaler is not None:
            self._scaler.scale(loss).backward()
        else:
            loss.backward()

    def step(self, optimizer: Optimizer, /, *optimizers: Optimizer) -> None:
        """Step the optimizers, then zero their gradients (``set_to_none=True``).

        Under ``"16-mixed"`` each step goes through the GradScaler (which skips the step
        when the gradients overflowed) and the scale is updated once, after all of them.
        """
        everyone = (optimizer, *optimizers)
        if self._scaler is not None:
            for opt in everyone:
                self._scaler.step(opt)
            self._scaler.update()
        else:
            for opt in everyone:
                opt.step()
        for opt in everyone:
            opt.zero_grad(set_to_none=True)

    # --- talking to the other processes -----------------------------------------------

    @overload
    def all_reduce(self, value: torch.Tensor, op: _Op = "mean") -> torch.Tensor: ...

    @overload
    def all_reduce(self, value: float, op: _Op = "mean") -> float: ...

    def all_reduce(self, value: torch.Tensor | float, op: _Op = "mean") -> torch.Tensor | float:
        """Combine a metric over all processes; every process gets the result.

        Args:
            value: a tensor, or a Python float or int.
            op: ``"mean"``, ``"sum"``, ``"max"`` or ``"min"``.

        Returns:
            The same kind of value: a tensor on the input's device (a float tensor for
            ``"mean"``), or a Python number (a float for ``"mean"``).

        Examples:
            >>> Runner("cpu").all_reduce(2.5, op="sum")
            2.5
        """
        if op not in _OPS:
            raise ValueError(f"unknown op {op!r}: use 'mean', 'sum', 'max' or 'min'.")
        if isinstance(value, bool) or not isinstance(value, torch.Tensor | float | int):
            raise ValueError(
                f"all_reduce() combines tensors and numbers, got a {type(value).__name__}."
            )
        if isinstance(value, torch.Tensor):
            tensor = value.detach()
            if op == "mean" and not (tensor.is_floating_point() or tensor.is_complex()):
                tensor = tensor.to(torch.get_default_dtype())
            return self._reduce(tensor, op).to(tensor.device)
        as_float = op == "mean" or isinstance(value, float)
        number = torch.tensor(value, dtype=torch.float64 if as_float else torch.int64)
        out = self._reduce(number, op).item()
        return float(out) if as_float else int(out)

    def _reduce(self, tensor: torch.Tensor, op: str) -> torch.Tensor:
        if self._world_size == 1:
            return tensor.clone()
        buffer = tensor.to(_distributed._comm_device(), copy=True)
        dist.all_reduce(buffer, op=_OPS[op])
        if op == "mean":
            buffer /= self._world_size
        return buffer

    def barrier(self) -> None:
        """Wait here until every process arrives (nothing to wait for when alone)."""
        if self._world_size > 1:
            dist.barrier()

    # --- the end ----------------------------------------------------------------------

    def close(self) -> None:
        """Leave the process group this Runner joined (one it did not start is kept)."""
        if self._owns_group:
            _distributed._end_group()
            self._owns_group = False

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Runner(device={str(self._device)!r}, precision={self.precision!r}, "
            f"rank={self._rank}, world_size={self._world_size})"
        )


def _choose_device(
    spec: str | int | torch.device, place: _distributed._Place
) -> tuple[torch.device, str]:
    """The device for this process and why."""
    under_launcher = place.world_size > 1
    if isinstance(spec, str) and spec in ("auto", "cuda", "gpu") and under_launcher:
        count = _cuda_device_count()
        who = f"process {place.rank} of {place.world_size}"
        if count > 0:
            if place.local_rank >= count:
                raise RuntimeError(
                    f"{who} has LOCAL_RANK={place.local_rank}, but this machine has only "
                    f"{count} visible GPU{'s' if count != 1 else ''}: start at most {count} "
                    f"processes per machine (torchplace run --gpus {count})."
                )
            chosen = torch.device("cuda", place.local_rank)
            return chosen, (
                f"{who}: one process per GPU, and LOCAL_RANK={place.local_rank} picks {chosen}"
            )
        if spec == "auto":
            return torch.device("cpu"), (
                f"{who}: no CUDA GPU is visible, so every process trains on the CPU (gloo)"
            )
    if isinstance(spec, str) and spec == "auto":
        return _explain_auto()
    chosen = _resolve_device(spec)
    return chosen, f"asked for {spec!r}"


def _check_model(model: object) -> None:
    if not isinstance(model, nn.Module):
        raise ValueError(
            f"setup() takes an nn.Module as the model, got a {type(model).__name__}: wrap "
            f"bare tensors in a module (register them with nn.Parameter or register_buffer) "
            f"so that they move with it."
        )
    if isinstance(model, nn.parallel.DistributedDataParallel | nn.DataParallel):
        raise ValueError(
            f"setup() got a model already wrapped in {type(model).__name__}: pass the plain "
            f"module (model.module); the Runner wraps it in DistributedDataParallel itself "
            f"when several processes train together."
        )
    tensors = [*model.named_parameters(), *model.named_buffers()]
    placed: dict[torch.device, str] = {}
    for name, tensor in tensors:
        placed.setdefault(tensor.device, name)
    if len(placed) > 1:
        listing = ", ".join(f"{device} ({name!r}, ...)" for device, name in placed.items())
        raise ValueError(
            f"the model is spread over {len(placed)} devices: {listing}. The Runner trains "
            f"one whole copy of the model per process (DDP), so it does not split or merge "
            f"models placed by hand or with device_map='auto': put the model on one device "
            f"first (model.to('cpu')), or train a model-parallel model without the Runner."
        )
    if placed and next(iter(placed)).type == "meta":
        raise ValueError(
            f"the model's parameters are on the meta device ({next(iter(placed.values()))!r}, "
            f"...), which holds no data: materialise them first (model.to_empty(device=...) "
            f"and initialise or load weights)."
        )


# --- seams ------------------------------------------------------------------------------


def _cuda_device_count() -> int:
    return torch.cuda.device_count()
