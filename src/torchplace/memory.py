"""Memory accounting: the bytes tensors really hold, per device, and the allocator's view.

- :func:`tensor_bytes` counts unique storages, so a view, a tensor shared by two
  modules and tied weights are counted once. A view of part of a larger storage counts
  the whole storage: that is what stays in memory while the view is alive.
- :func:`model_memory` splits a model (and its optimizer) into parameters, gradients,
  buffers and optimizer state.
- :func:`allocator_stats` asks the backend's caching allocator what it holds; it answers
  ``None`` on CPU and for accelerators that are not present.
- :func:`format_bytes` and :func:`parse_size` show and read sizes.

Examples:
    >>> import torch
    >>> from torchplace.memory import format_bytes, tensor_bytes
    >>> x = torch.zeros(1024, 1024)
    >>> tensor_bytes({"x": x, "view": x[:10], "again": [x]})
    {device(type='cpu'): 4194304}
    >>> format_bytes(4194304)
    '4.0 MiB'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from torchplace._units import format_bytes, parse_size

__all__ = [
    "AllocatorStats",
    "ModelMemory",
    "allocator_stats",
    "format_bytes",
    "model_memory",
    "parse_size",
    "tensor_bytes",
]

# identity of one storage: ("ptr", device, data_ptr, nbytes) for storages with data,
# ("obj", id) for meta and fake tensors, which have no data pointer
_StorageKey = tuple[Any, ...]


# ---------------------------------------------------------------------------- counting


def tensor_bytes(obj: object) -> dict[torch.device, int]:
    """Bytes held by the tensors in ``obj``, per device, each storage counted once.

    ``obj`` may be a tensor, a module (its parameters and buffers), or any nesting of
    dicts, lists, tuples, named tuples, sets and dataclass instances; other objects are
    ignored. Tensors that share a storage (views, ``x.view(...)``, tied weights, the same
    tensor reached twice) count once, for the whole storage: a small slice of a large
    tensor keeps the large storage alive, so it counts the large storage. Meta and fake
    tensors hold no data but are counted on the device they report, which is what the
    memory would be on a real device.

    Args:
        obj: What to measure.

    Returns:
        Device -> bytes, only for devices that hold something (or a storage of 0 bytes).

    Examples:
        >>> import torch
        >>> from torchplace.memory import tensor_bytes
        >>> w = torch.nn.Linear(4, 4, bias=False)
        >>> model = torch.nn.Sequential(w, w)  # the same layer twice: counted once
        >>> tensor_bytes(model)
        {device(type='cpu'): 64}
        >>> tensor_bytes([torch.zeros(8), torch.empty(100, device="meta")])
        {device(type='cpu'): 32, device(type='meta'): 400}
    """
    totals: dict[torch.device, int] = {}
    seen: set[_StorageKey] = set()
    for tensor in _tensors(obj):
        _add(tensor, totals, seen)
    return totals


@dataclass(frozen=True)
class ModelMemory:
    """Memory a model and its optimizer hold, in bytes, each storage counted once.

    A storage is counted in the first category that reaches it, in the order
    parameters, buffers, gradients, optimizer state, so the categories add up to
    :attr:`total`.

    Attributes:
        parameters: Parameter storages (tied weights once).
        gradients: ``.grad`` storages of the parameters.
        buffers: Buffer storages (running statistics, masks...).
        optimizer_state: Optimizer state tensors (Adam's ``exp_avg``, ``exp_avg_sq`` and
            ``step``, SGD's ``momentum_buffer``...) not already counted above.
        per_device: Device (as a string, e.g. ``"cuda:0"``) -> bytes of all categories.
    """

    parameters: int
    gradients: int
    buffers: int
    optimizer_state: int
    per_device: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """All categories together, in bytes."""
        return self.parameters + self.gradients + self.buffers + self.optimizer_state

    def to_dict(self) -> dict[str, Any]:
        """The breakdown as plain values, ``total`` included.

        Examples:
            >>> import torch
            >>> from torchplace.memory import model_memory
            >>> model_memory(torch.nn.Linear(2, 2)).to_dict()["total"]
            24
        """
        return {
            "parameters": self.parameters,
            "gradients": self.gradients,
            "buffers": self.buffers,
            "optimizer_state": self.optimizer_state,
            "total": self.total,
            "per_device": dict(self.per_device),
        }


def model_memory(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
) -> ModelMemory:
    """Break down the memory of ``model`` (and of ``optimizer``'s state).

    Only registered parameters and buffers of the model count; tensors kept as plain
    attributes do not (measure them with :func:`tensor_bytes`). Optimizer state exists
    after the first ``optimizer.step()``: Adam then holds two tensors the size of each
    parameter plus a 4-byte ``step`` tensor per parameter.

    Args:
        model: The module.
        optimizer: Its optimizer, if any.

    Returns:
        A :class:`ModelMemory`.

    Raises:
        ValueError: If ``model`` is not a module or ``optimizer`` not an optimizer.

    Examples:
        >>> import torch
        >>> from torchplace.memory import model_memory
        >>> model = torch.nn.Linear(10, 10)  # 110 float32 parameters
        >>> opt = torch.optim.Adam(model.parameters())
        >>> model(torch.randn(3, 10)).sum().backward()
        >>> opt.step()
        >>> m = model_memory(model, opt)
        >>> m.parameters, m.gradients, m.optimizer_state, m.total
        (440, 440, 888, 1768)
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(
            f"model_memory expects a torch.nn.Module, got {type(model).__name__}; "
            "use tensor_bytes() to measure other objects."
        )
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(
            f"optimizer must be a torch.optim.Optimizer or None, got {type(optimizer).__name__}."
        )
    params = list(model.parameters())
    categories: list[object] = [
        params,
        list(model.buffers()),
        [p.grad for p in params if p.grad is not None],
        [] if optimizer is None else list(optimizer.state.values()),
    ]
    seen: set[_StorageKey] = set()
    per_device: dict[torch.device, int] = {}
    counts = []
    for category in categories:
        totals: dict[torch.device, int] = {}
        for tensor in _tensors(category):
            _add(tensor, totals, seen)
        counts.append(sum(totals.values()))
        for dev, n in totals.items():
            per_device[dev] = per_device.get(dev, 0) + n
    return ModelMemory(
        parameters=counts[0],
        buffers=counts[1],
        gradients=counts[2],
        optimizer_state=counts[3],
        per_device={str(dev): n for dev, n in per_device.items()},
    )


def _tensors(obj: object) -> Iterator[torch.Tensor]:
    """Every tensor in ``obj`` (containers walked depth first, cycles cut)."""
    visited: set[int] = set()
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            yield item
            continue
        if isinstance(item, (str, bytes, bytearray)) or id(item) in visited:
            continue
        visited.add(id(item))
        children: list[object] = []
        if isinstance(item, torch.nn.Module):
            children = [*item.parameters(), *item.buffers()]
        elif isinstance(item, Mapping):
            children = list(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            children = list(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            children = [getattr(item, f.name) for f in dataclasses.fields(item)]
        stack.extend(reversed(children))  # so that tensors come in the order given


def _add(tensor: torch.Tensor, totals: dict[torch.device, int], seen: set[_StorageKey]) -> None:
    for key, nbytes in _storages(tensor):
        if key in seen:
            continue
        seen.add(key)
        totals[tensor.device] = totals.get(tensor.device, 0) + nbytes


def _storages(tensor: torch.Tensor) -> Iterator[tuple[_StorageKey, int]]:
    """The storages behind ``tensor`` as (identity, bytes)."""
    layout = tensor.layout
    if layout == torch.sparse_coo:
        parts = [tensor._indices(), tensor._values()]
    elif layout in (torch.sparse_csr, torch.sparse_bsr):
        parts = [tensor.crow_indices(), tensor.col_indices(), tensor.values()]
    elif layout in (torch.sparse_csc, torch.sparse_bsc):
        parts = [tensor.ccol_indices(), tensor.row_indices(), tensor.values()]
    else:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError, TypeError):
            # a wrapper subclass without storage of its own (e.g. DTensor): its parts
            flatten = getattr(tensor, "__tensor_flatten__", None)
            if flatten is None:
                yield ("obj", id(tensor)), tensor.numel() * tensor.element_size()
                return
            parts = [getattr(tensor, name) for name in flatten()[0]]
        else:
            nbytes = storage.nbytes()
            if storage.device.type == "meta":  # meta and fake tensors: no data pointer
                yield ("obj", getattr(storage, "_cdata", id(storage))), nbytes
            else:
                yield ("ptr", storage.device, storage.data_ptr(), nbytes), nbytes
            return
    for part in parts:
        yield from _storages(part)


# --------------------------------------------------------------------------- allocator


@dataclass(frozen=True)
class AllocatorStats:
    """What a backend's caching allocator holds for this process, in bytes.

    Attributes:
        device: The device, e.g. ``"cuda:0"``.
        allocated: Bytes in live tensors.
        reserved: Bytes the allocator holds from the driver (allocated plus cached).
        peak_allocated: Highest ``allocated`` since start or the last peak reset.
        peak_reserved: Highest ``reserved`` since start or the last peak reset.

    A field is ``None`` where the backend does not report it (MPS has no peaks).
    """

    device: str
    allocated: int | None
    reserved: int | None
    peak_allocated: int | None
    peak_reserved: int | None

    def to_dict(self) -> dict[str, Any]:
        """The statistics as a plain dict."""
        return dataclasses.asdict(self)


def allocator_stats(device: torch.device | str | int | None = None) -> AllocatorStats | None:
    """Live statistics of the caching allocator of ``device``, or ``None``.

    ``None`` means there is nothing to ask: the device is the CPU (or ``meta``), or an
    accelerator that is not present. ``device=None`` takes the current CUDA device, else
    the XPU, else MPS. On CUDA and XPU the figures are those of
    ``torch.cuda.memory_stats`` (``nvidia-smi`` shows more: it adds the CUDA context and
    other processes); before CUDA is initialised in this process nothing has been
    allocated and the figures are 0, and asking does not initialise CUDA. On MPS
    ``allocated`` is ``torch.mps.current_allocated_memory()`` and ``reserved``
    ``torch.mps.driver_allocated_memory()``; peaks are ``None``.

    Args:
        device: A device, a device string (``"cuda:1"``, ``"mps"``) or a CUDA index.

    Returns:
        An :class:`AllocatorStats`, or ``None``.

    Raises:
        ValueError: If ``device`` is not a valid device.

    Examples:
        >>> from torchplace.memory import allocator_stats
        >>> print(allocator_stats("cpu"))
        None
    """
    dev = _resolve(device)
    if dev is None or dev.type in ("cpu", "meta"):
        return None
    if dev.type == "cuda":
        if not _cuda_available():
            return None
        index = _cuda_current_index() if dev.index is None else dev.index
        if index >= _cuda_device_count():
            return None
        return _from_stats(f"cuda:{index}", _cuda_memory_stats(index))
    if dev.type == "xpu":
        if not _xpu_available():
            return None
        index = 0 if dev.index is None else dev.index
        if index >= _xpu_device_count():
            return None
        return _from_stats(f"xpu:{index}", _xpu_memory_stats(index))
    if dev.type == "mps":
        if not _mps_available() or (dev.index or 0) > 0:
            return None
        allocated, reserved = _mps_memory()
        return AllocatorStats("mps", allocated, reserved, None, None)
    if _accelerator_type() != dev.type:
        return None
    index = 0 if dev.index is None else dev.index
    return _from_stats(f"{dev.type}:{index}", _accelerator_memory_stats(index))


def _resolve(device: torch.device | str | int | None) -> torch.device | None:
    if device is None:
        if _cuda_available():
            return torch.device("cuda")
        if _xpu_available():
            return torch.device("xpu")
        if _mps_available():
            return torch.device("mps")
        return None
    if isinstance(device, bool):
        raise ValueError(f"Not a device: {device!r}. Pass e.g. 'cuda:0', 'mps' or 0.")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"A device index must be >= 0, got {device}.")
        return torch.device("cuda", device)
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(
            f"Not a device: {device!r}. Pass e.g. 'cuda:0', 'cuda', 'mps', 'xpu' or 'cpu'."
        ) from e


_STAT_KEYS = {
    "allocated": "allocated_bytes.all.current",
    "reserved": "reserved_bytes.all.current",
    "peak_allocated": "allocated_bytes.all.peak",
    "peak_reserved": "reserved_bytes.all.peak",
}


def _from_stats(device: str, stats: Mapping[str, Any]) -> AllocatorStats:
    # an empty dict means the allocator was never initialised: nothing allocated yet
    values = {
        field_name: (0 if not stats else _int_or_none(stats.get(key)))
        for field_name, key in _STAT_KEYS.items()
    }
    return AllocatorStats(device, **values)


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# Hardware seams: one query each, patched by tests to exercise every backend on a CPU.


def _cuda_available() -> bool:
    return torch.cuda.is_available()


def _cuda_device_count() -> int:
    return torch.cuda.device_count()


def _cuda_current_index() -> int:
    # current_device() would initialise CUDA; before initialisation it is device 0
    initialized = torch.cuda.is_initialized()  # type: ignore[no-untyped-call, unused-ignore]
    return torch.cuda.current_device() if initialized else 0


def _cuda_memory_stats(index: int) -> Mapping[str, Any]:
    return torch.cuda.memory_stats(index)  # {} (without initialising) before first use


def _xpu_available() -> bool:
    xpu = getattr(torch, "xpu", None)
    return xpu is not None and bool(xpu.is_available())


def _xpu_device_count() -> int:
    return int(torch.xpu.device_count())


def _xpu_memory_stats(index: int) -> Mapping[str, Any]:
    return torch.xpu.memory_stats(index)


def _mps_available() -> bool:
    return torch.backends.mps.is_available()


def _mps_memory() -> tuple[int, int]:
    return torch.mps.current_allocated_memory(), torch.mps.driver_allocated_memory()


def _accelerator_type() -> str | None:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not accelerator.is_available():
        return None
    current = accelerator.current_accelerator()
    return None if current is None else str(current.type)


def _accelerator_memory_stats(index: int) -> Mapping[str, Any]:
    memory_stats = getattr(torch.accelerator, "memory_stats", None)  # torch >= 2.9
    return {} if memory_stats is None else memory_stats(index)


# ------------------------------------------------------------------------------- sizes
