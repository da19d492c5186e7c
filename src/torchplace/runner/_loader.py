"""Batches for one process: its share of the data (DistributedSampler), on its device.

Three jobs, each where it applies:

- sharding: in a job of N processes, a DataLoader is rebuilt with a
  :class:`~torch.utils.data.DistributedSampler`, keeping every other setting, so each
  process sees its own 1/N of every epoch; the sampler's epoch is advanced on every pass
  so each epoch is shuffled differently (and identically on every rank).
- placement: every batch is moved with :func:`torchplace.move.to` and its safe
  ``non_blocking`` policy (non-blocking only host-to-device from pinned memory).
- overlap on CUDA: the DataLoader pins its batches (``pin_memory=True``) and the next
  batch is copied on a side stream while the current one is being computed on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)

from torchplace.move import to as _move_to

__all__ = ["DeviceLoader"]


class DeviceLoader:
    """An iterable over a DataLoader's batches, moved to the device (``Runner.loader``).

    Each pass over it is one epoch: the first pass is epoch 0, and the DistributedSampler
    (when there is one) is told the epoch before the pass starts. A resumed run sets the
    epoch it restarts at with :meth:`set_epoch`.

    Attributes:
        dataloader: the DataLoader it reads (rebuilt with a DistributedSampler in a job
            of several processes).
        device: where the batches go.

    Examples:
        >>> import torch
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> data = DataLoader(TensorDataset(torch.arange(6.0)), batch_size=4)
        >>> loader = DeviceLoader(data, torch.device("cpu"))
        >>> [batch[0].tolist() for batch in loader], len(loader), loader.epoch
        ([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]], 2, 1)
    """

    def __init__(self, dataloader: Iterable[Any], device: torch.device) -> None:
        self.dataloader = dataloader
        self.device = device
        self._epoch = 0

    @property
    def epoch(self) -> int:
        """The epoch the next pass will be."""
        return self._epoch

    @property
    def sampler(self) -> Any:
        """The DataLoader's sampler (a DistributedSampler in a job), or ``None``."""
        return getattr(self.dataloader, "sampler", None)

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass epoch ``epoch`` (for a run resumed from a checkpoint)."""
        if epoch < 0:
            raise ValueError(f"the epoch counts from 0, got {epoch}.")
        self._epoch = epoch

    def __len__(self) -> int:
        return len(self.dataloader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        epoch, self._epoch = self._epoch, self._epoch + 1
        if isinstance(self.sampler, DistributedSampler):
            self.sampler.set_epoch(epoch)
        if self.device.type == "cuda":
            return _prefetching(iter(self.dataloader), self.device)
        return (_move_to(batch, self.device) for batch in self.dataloader)

    def __repr__(self) -> str:
        return f"DeviceLoader(device={self.device}, batches={len(self)}, epoch={self._epoch})"


def _prefetching(batches: Iterator[Any], device: torch.device) -> Iterator[Any]:
    """Copy batch i+1 to ``device`` on a side stream while the caller computes on batch i."""
    stream = _side_stream(device)

    def fetch() -> tuple[bool, Any]:
        try:
            batch = next(batches)
        except StopIteration:
            return False, None
        with _on_stream(stream):
            return True, _move_to(batch, device)

    more, upcoming = fetch()
    while more:
        _wait_for(stream, device)  # the compute stream waits for the copies
        batch = upcoming
        for tensor in _tensors(batch):
            _record_on_current(tensor, device)  # keep the memory until compute is done
        more, upcoming = fetch()
        yield batch


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value)
    elif isinstance(obj, list | tuple | set | frozenset):
        for value in obj:
            yield from _tensors(value)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from _tensors(getattr(obj, field.name, None))


def _prepare(
    dataloader: Iterable[Any], *, rank: int, world_size: int, pin_memory: bool
) -> Iterable[Any]:
    """The DataLoader to read: with a DistributedSampler when ``world_size > 1`` and pinning
    its batches when ``pin_memory``; the same object when nothing needs to change."""
    if not isinstance(dataloader, DataLoader):
        if world_size > 1:
            raise ValueError(
                f"loader() shards a torch.utils.data.DataLoader over the {world_size} "
                f"processes, but got a {type(dataloader).__name__}: pass a DataLoader, or "
                f"shard the data yourself (by rank) and iterate it directly."
            )
        return dataloader
    if isinstance(dataloader.dataset, IterableDataset):
        if world_size > 1:
            warnings.warn(
                f"the DataLoader reads an IterableDataset, which takes no sampler, so each of "
                f"the {world_size} processes sees all of it unless the dataset itself "
                f"shards by rank (torch.distributed.get_rank()).",
                UserWarning,
                stacklevel=3,
            )
        return dataloader
    shard = world_size > 1 and not isinstance(dataloader.sampler, DistributedSampler)
    pin = pin_memory and not dataloader.pin_memory
    if not shard and not pin:
        return dataloader
    if type(dataloader) is not DataLoader:
        if shard:
            raise ValueError(
                f"loader() cannot rebuild a {type(dataloader).__name__} (a DataLoader "
                f"subclass) with a DistributedSampler: build it with "
                f"sampler=DistributedSampler(dataset) yourself and pass it again."
            )
        return dataloader  # pinning is only an optimisation: keep the user's class
    sampler = dataloader.sampler
    if shard:
        sampler = _distributed_sampler(dataloader, rank=rank, world_size=world_size)
    return _rebuild(dataloader, sampler=sampler, pin_memory=dataloader.pin_memory or pin)


def _distributed_sampler(
    dataloader: DataLoader[Any], *, rank: int, world_size: int
) -> DistributedSampler[Any]:
    if dataloader.batch_size is None and dataloader.batch_sampler is not None:
        raise ValueError(
            f"loader() cannot shard a DataLoader built with its own batch_sampler "
            f"({type(dataloader.batch_sampler).__name__}) over {world_size} processes: "
            f"make the batch sampler split its indices by rank, or use batch_size= with a "
            f"DistributedSampler."
        )
    sampler = dataloader.sampler
    if not isinstance(sampler, RandomSampler | SequentialSampler):
        raise ValueError(
            f"loader() replaces the DataLoader's sampler with a DistributedSampler to split "
            f"the data over {world_size} processes, and would drop its "
            f"{type(sampler).__name__}: write a sampler that also splits by rank, or "
            f"pass sampler=DistributedSampler(dataset) yourself."
        )
    shuffle = isinstance(sampler, RandomSampler)
    generator = getattr(sampler, "generator", None) or dataloader.generator
    seed = generator.initial_seed() if shuffle and generator is not None else 0
    return DistributedSampler(
        dataloader.dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed
    )


def _rebuild(dataloader: DataLoader[Any], *, sampler: Any, pin_memory: bool) -> DataLoader[Any]:
    """The same DataLoader with another sampler and pin_memory; every other setting kept."""
    workers = dataloader.num_workers
    settings: dict[str, Any] = {
        "num_workers": workers,
        "collate_fn": dataloader.collate_fn,
        "pin_memory": pin_memory,
        "timeout": dataloader.timeout,
        "worker_init_fn": dataloader.worker_init_fn,
        "multiprocessing_context": dataloader.multiprocessing_context,
        "generator": dataloader.generator,
        "prefetch_factor": dataloader.prefetch_factor if workers > 0 else None,
        "persistent_workers": dataloader.persistent_workers,
        "pin_memory_device": dataloader.pin_memory_device,
    }
    if hasattr(dataloader, "in_order"):  # torch >= 2.6
        settings["in_order"] = dataloader.in_order
    if dataloader.batch_size is None and dataloader.batch_sampler is not None:
        return DataLoader(dataloader.dataset, batch_sampler=dataloader.batch_sampler, **settings)
    return DataLoader(
        dataloader.dataset,
        batch_size=dataloader.batch_size,
        sampler=sampler,
        drop_last=dataloader.drop_last,
        **settings,
    )


# --- seams: CUDA streams (tests patch these to exercise the prefetch on a CPU) -----------


def _side_stream(device: torch.device) -> Any:
    return torch.cuda.Stream(device)


def _on_stream(stream: Any) -> contextlib.AbstractContextManager[Any]:
    return torch.cuda.stream(stream)


def _wait_for(stream: Any, device: torch.device) -> None:
    torch.cuda.current_stream(device).wait_stream(stream)


def _record_on_current(tensor: torch.Tensor, device: torch.device) -> None:
    if tensor.device.type == "cuda":
        tensor.record_stream(torch.cuda.current_stream(device))
