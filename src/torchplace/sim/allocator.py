"""A model of PyTorch's CUDA caching allocator, for the GPU simulator.

The simulator sees every storage allocation and free of a user's script in program
order. Replaying them through :class:`CachingAllocatorModel` gives what the real
allocator (``c10/cuda/CUDACachingAllocator.cpp`` in PyTorch) would report —
``torch.cuda.memory_allocated()``, ``torch.cuda.memory_reserved()`` (what ``nvidia-smi``
shows beyond the CUDA context), their peaks, ``torch.cuda.memory_stats()`` and
``torch.cuda.memory._snapshot()["segments"]`` — and decides out-of-memory the way the
real allocator does, with CUDA's own message.

Modelled, following the source:

- every request is rounded up to a multiple of 512 bytes (``kMinBlockSize``);
- requests up to 1 MiB (``kSmallSize``) are served from a small pool of 2 MiB segments
  (``kSmallBuffer``); larger ones from a large pool, where a request under 10 MiB
  (``kMinLargeAlloc``) makes a 20 MiB segment (``kLargeBuffer``) and a bigger one a
  segment rounded up to 2 MiB (``kRoundLarge``);
- best fit: the free block of the same stream with the smallest size, then the lowest
  address (the pool is a set ordered by ``(stream, size, address)``);
- a block is split when enough remains: at least 512 bytes in the small pool, more than
  1 MiB in the large pool (and only for requests under ``max_split_size``);
- a freed block merges with free neighbours of its segment;
- ``max_split_size`` (``PYTORCH_ALLOC_CONF=max_split_size_mb:N``, unlimited by default):
  oversize cached blocks serve only requests within ``max_non_split_rounding``
  (20 MiB by default) of their size, and are released first when ``cudaMalloc`` fails;
- when ``cudaMalloc`` fails the allocator releases every fully free cached segment
  (as ``torch.cuda.empty_cache()`` does) and retries once before raising out-of-memory.

Private pools (``torch.cuda.MemPool``, a CUDA graph's pool) are modelled as in
``beginAllocateToPool`` / ``endAllocateToPool`` / ``releasePool``: while a pool is the
target, requests are served from its own small and large pools (its own segments), its
freed blocks stay in it, and ``empty_cache`` releases its free segments only once no one
uses the pool any more.

``roundup_power2_divisions`` rounds requests up to the next of ``n`` steps between two
powers of two (:meth:`CachingAllocatorModel.configure`).

Not modelled: ``expandable_segments:True`` (segments that grow by mapping pages),
``garbage_collection_threshold`` (it only acts together with a per-process memory
fraction). ``record_stream``'s delayed free is :meth:`CachingAllocatorModel.free` with
``pending`` and :meth:`CachingAllocatorModel.release`: the block leaves the allocation stats
at its free (c10's ``active`` stats, which keep it until the release, are the allocation
stats here). ``cudaMalloc`` is
assumed to succeed exactly when the segment fits in the device memory left over.

Examples:
    >>> model = CachingAllocatorModel(80 * 1024**3)
    >>> handle = model.malloc(4)  # torch.zeros(1, device="cuda")
    >>> model.allocated_bytes, model.reserved_bytes
    (512, 2097152)
    >>> model.free(handle)
    >>> model.allocated_bytes, model.reserved_bytes  # the segment stays cached
    (0, 2097152)
    >>> model.empty_cache()
    >>> model.reserved_bytes
    0
"""

from __future__ import annotations

import functools
import threading
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate, compress
from typing import Any

__all__ = ["AllocatorOOM", "CachingAllocatorModel", "round_size", "segment_size"]

_MIN_BLOCK_SIZE = 512  # kMinBlockSize: every block is a multiple of this
_SMALL_SIZE = 1024**2  # kSmallSize: largest request served by the small pool
_SMALL_BUFFER = 2 * 1024**2  # kSmallBuffer: size of a small-pool segment
_LARGE_BUFFER = 20 * 1024**2  # kLargeBuffer: segment for requests in (1 MiB, 10 MiB)
_MIN_LARGE_ALLOC = 10 * 1024**2  # kMinLargeAlloc
_ROUND_LARGE = 2 * 1024**2  # kRoundLarge: larger segments are rounded up to this
_UNLIMITED = 2**64 - 1  # SIZE_MAX, the default max_split_size (every block may split)
# cudaMalloc hands out device virtual addresses; any 2 MiB-aligned start will do.
_BASE_ADDRESS = 0x7F00_0000_0000

_ALL, _SMALL, _LARGE = 0, 1, 2  # StatType: aggregate, small pool, large pool
_POOL_NAMES = ("all", "small_pool", "large_pool")


def round_size(nbytes: int) -> int:
    """Return the block size the allocator uses for a request of ``nbytes``.

    Requests are rounded up to a multiple of 512 bytes, and anything smaller than 512
    bytes (0 included) becomes 512. A zero-byte tensor never reaches the allocator,
    though: ``CUDACachingAllocator::allocate(0)`` returns a null pointer without a block
    (see :meth:`CachingAllocatorModel.malloc`).

    Args:
        nbytes: the requested size in bytes.

    Returns:
        The rounded block size in bytes.

    Raises:
        ValueError: if ``nbytes`` is not a non-negative integer.

    Examples:
        >>> [round_size(n) for n in (0, 1, 512, 513)]
        [512, 512, 512, 1024]
    """
    _check_bytes("nbytes", nbytes)
    if nbytes < _MIN_BLOCK_SIZE:
        return _MIN_BLOCK_SIZE
    return -(-nbytes // _MIN_BLOCK_SIZE) * _MIN_BLOCK_SIZE


def segment_size(rounded: int) -> int:
    """Return the size of the segment ``cudaMalloc`` is asked for when no cached block fits.

    Args:
        rounded: a block size as returned by :func:`round_size`.

    Returns:
        2 MiB for small requests (up to 1 MiB), 20 MiB for requests under 10 MiB, and
        the request rounded up to a multiple of 2 MiB otherwise.

    Raises:
        ValueError: if ``rounded`` is not a non-negative integer.

    Examples:
        >>> MiB = 1024**2
        >>> [segment_size(n) // MiB for n in (512, 1 * MiB, 5 * MiB, 10 * MiB, 11 * MiB)]
        [2, 2, 20, 10, 12]
    """
    _check_bytes("rounded", rounded)
    if rounded <= _SMALL_SIZE:
        return _SMALL_BUFFER
    if rounded < _MIN_LARGE_ALLOC:
        return _LARGE_BUFFER
    return -(-rounded // _ROUND_LARGE) * _ROUND_LARGE


def _round_divisions(nbytes: int, divisions: list[int]) -> int:
    """``round_size`` with ``roundup_power2_divisions`` (c10/cuda/CUDACachingAllocator.cpp;
    the intervals of c10/core/AllocatorConfig.cpp ``roundup_power2_divisions``): a request
    rounds up to the next of ``n`` equal steps between two powers of two.

    Examples:
        >>> _round_divisions(21 * 1024 * 1024 * 4, [4] * 16) // 1024**2
        96
    """
    if nbytes < _MIN_BLOCK_SIZE:
        return _MIN_BLOCK_SIZE
    index = min(max(nbytes.bit_length() - 1 - 20, 0), len(divisions) - 1)  # 1 MiB = 2**20
    n = divisions[index]
    if n > 1 and nbytes > _MIN_BLOCK_SIZE * n:
        if nbytes & (nbytes - 1) == 0:
            return nbytes
        floor = 1 << (nbytes.bit_length() - 1)
        step = floor >> (n.bit_length() - 1)
        if step == 0:
            return floor << 1
        rounded = nbytes & ~(step - 1)
        return nbytes if rounded == nbytes else rounded + step
    return -(-nbytes // _MIN_BLOCK_SIZE) * _MIN_BLOCK_SIZE


class AllocatorOOM(RuntimeError):
    """The simulated allocator cannot get memory for a request, even after emptying its cache.

    Attributes:
        requested: the rounded size of the request in bytes.
        alloc_size: the segment size ``cudaMalloc`` was asked for; CUDA's message
            reports this one ("Tried to allocate 20.00 MiB" for a 5 MiB tensor).
        free_device: device memory left over in bytes, ``capacity - reserved_outside -
            reserved`` (what ``cudaMemGetInfo`` would say), after the cache was emptied.
        allocated: bytes in live blocks (``torch.cuda.memory_allocated()``).
        reserved: bytes in segments (``torch.cuda.memory_reserved()``).
        capacity: total device memory in bytes.
        device_index: the simulated CUDA device the allocator belongs to.
        hint: what the user can do about it.

    Examples:
        >>> GiB = 1024**3
        >>> model = CachingAllocatorModel(2 * GiB)
        >>> try:
        ...     model.malloc(3 * GiB)
        ... except AllocatorOOM as e:
        ...     print(e.alloc_size // GiB, e.free_device // GiB)
        ...     print(e.message(0)[:47])
        3 2
        CUDA out of memory. Tried to allocate 3.00 GiB.
    """

    def __init__(
        self,
        *,
        requested: int,
        alloc_size: int,
        free_device: int,
        allocated: int,
        reserved: int,
        capacity: int,
        device_index: int = 0,
        allowed: int | None = None,
    ) -> None:
        self.requested = requested
        self.allowed = allowed
        self.alloc_size = alloc_size
        self.free_device = free_device
        self.allocated = allocated
        self.reserved = reserved
        self.capacity = capacity
        self.device_index = device_index
        self.hint = (
            "free tensors you no longer need before this point, lower the batch size, "
            "or simulate a GPU with more memory"
        )
        super().__init__(self.message(device_index))

    def message(self, device_index: int) -> str:
        """Return the message PyTorch's ``torch.OutOfMemoryError`` carries in this state.

        The wording follows ``DeviceCachingAllocator::malloc`` in current PyTorch.
        Differences between versions: releases before the device-generic allocator
        configuration name ``PYTORCH_CUDA_ALLOC_CONF`` instead of ``PYTORCH_ALLOC_CONF``;
        PyTorch 2.0 and earlier used another, parenthesised format ("(GPU 0; 79.11 GiB
        total capacity; ...)"). NVML's line on the process's use (``reportProcessMemoryInfo``)
        counts everything the GPU does not have free, the simulated GPU being this
        process's alone.

        Args:
            device_index: the CUDA device index to name in the message.

        Returns:
            The message, sizes formatted like ``c10::CachingAllocator::format_size``.
        """
        return (
            f"CUDA out of memory. Tried to allocate {_format_size(self.alloc_size)}. "
            f"GPU {device_index} has a total capacity of {_format_size(self.capacity)} "
            f"of which {_format_size(self.free_device)} is free. "
            # reportProcessMemoryInfo (NVML): the GPU is this process's alone here
            f"Including non-PyTorch memory, this process has "
            f"{_format_size(self.capacity - self.free_device)} memory in use. "
            + (f"{_format_size(self.allowed)} allowed; " if self.allowed is not None else "")
            + f"Of the allocated memory {_format_size(self.allocated)} is allocated by PyTorch, "
            f"and {_format_size(self.reserved - self.allocated)} is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
            "See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # The simulator runs scripts in a child process and sends this error back.
        fields: dict[str, Any] = {
            "requested": self.requested,
            "alloc_size": self.alloc_size,
            "free_device": self.free_device,
            "allocated": self.allocated,
            "reserved": self.reserved,
            "capacity": self.capacity,
            "device_index": self.device_index,
            "allowed": self.allowed,
        }
        return (functools.partial(AllocatorOOM, **fields), ())


class CachingAllocatorModel:
    """One CUDA device's caching allocator, replayed on allocation and free events.

    Handles returned by :meth:`malloc` are the blocks' simulated device addresses, as
    the real allocator returns pointers; ``0`` is the null pointer of a zero-byte
    tensor. Everything is exact integer bookkeeping: no memory is touched.

    Args:
        capacity_bytes: total memory of the device (``torch.cuda.get_device_properties(
            i).total_memory``).
        reserved_outside: bytes held outside the allocator — the CUDA context, other
            processes — which ``cudaMalloc`` cannot get.
        device_index: the CUDA device index, named in snapshots and error messages.
        max_split_size: blocks this large or larger are never split
            (``PYTORCH_ALLOC_CONF=max_split_size_mb``); ``None`` means unlimited, the
            default. PyTorch accepts 20 MiB or more.
        max_non_split_rounding: how much larger than a request an oversize cached block
            may be and still serve it (``max_non_split_rounding_mb``, 20 MiB by default).

    Raises:
        ValueError: if a size is negative, not an integer, or out of the range above.

    Examples:
        >>> MiB = 1024**2
        >>> model = CachingAllocatorModel(80 * 1024**3)
        >>> a = model.malloc(4 * MiB)  # torch.zeros(1024, 1024, device="cuda")
        >>> model.reserved_bytes // MiB, model.num_segments
        (20, 1)
        >>> b = model.malloc(4 * MiB)  # split from the same 20 MiB segment
        >>> model.allocated_bytes // MiB, model.reserved_bytes // MiB
        (8, 20)
    """

    def __init__(
        self,
        capacity_bytes: int,
        *,
        reserved_outside: int = 0,
        device_index: int = 0,
        max_split_size: int | None = None,
        max_non_split_rounding: int = _LARGE_BUFFER,
    ) -> None:
        _check_bytes("capacity_bytes", capacity_bytes)
        if capacity_bytes == 0:
            raise ValueError(
                "capacity_bytes must be the device's total memory in bytes, got 0; "
                "for an 80 GiB GPU pass 80 * 1024**3."
            )
        _check_bytes("reserved_outside", reserved_outside)
        if reserved_outside > capacity_bytes:
            raise ValueError(
                f"reserved_outside ({reserved_outside} bytes) is larger than the device "
                f"({capacity_bytes} bytes); pass the CUDA context and other processes' "
                "usage, which must fit on the device."
            )
        _check_bytes("device_index", device_index)
        if max_split_size is not None:
            _check_bytes("max_split_size", max_split_size)
            if max_split_size < _LARGE_BUFFER:
                raise ValueError(
                    f"max_split_size must be at least 20 MiB ({_LARGE_BUFFER} bytes) as in "
                    f"PyTorch's max_split_size_mb, got {max_split_size}; pass None for "
                    "the default (unlimited)."
                )
        _check_bytes("max_non_split_rounding", max_non_split_rounding)
        if max_non_split_rounding < _LARGE_BUFFER:
            raise ValueError(
                "max_non_split_rounding must be at least 20 MiB "
                f"({_LARGE_BUFFER} bytes) as in PyTorch's max_non_split_rounding_mb, "
                f"got {max_non_split_rounding}."
            )
        self._capacity = capacity_bytes
        self._reserved_outside = reserved_outside
        self._device_index = device_index
        self._max_split = _UNLIMITED if max_split_size is None else max_split_size
        self._max_non_split_rounding = max_non_split_rounding
        self._divisions: list[int] | None = None  # roundup_power2_divisions, by interval
        self._small_pool = _Pool(small=True)
        self._large_pool = _Pool(small=False)
        # private pools: id -> [small pool, large pool, users]; the pool allocated to now
        self._private: dict[tuple[int, int], list[Any]] = {}
        self._targets: list[tuple[int, int]] = []
        self._no_split: set[tuple[int, int]] = set()  # c10's no_split_pools (setNoSplit)
        #: the thread each target serves alone (None: every thread), as the filter c10's
        #: beginAllocateToPool keeps with it (_cuda_beginAllocateCurrentThreadToPool's
        #: filter compares std::this_thread::get_id())
        self._target_threads: list[int | None] = []
        self._blocks: dict[int, _Block] = {}  # every block, free or live, by address
        self._segments: dict[int, int] = {}  # segment base address -> size
        #: segments split since their cudaMalloc: c10 keeps a segment's context (the memory
        #: history's traceback) on the block cudaMalloc made, which a split turns into the
        #: tail, and a merge keeps only the earlier block's, so after a first split the
        #: segment's head has none (CUDACachingAllocator.cpp alloc_found_block, try_merge)
        self.split_segments: set[int] = set()
        self._next_address = _BASE_ADDRESS
        self._stats = {name: _StatArray() for name in _STAT_ARRAYS}
        # The block stats' changes, one row per malloc or free, applied when the stats are
        # read (_block_stats): the simulator allocates on nearly every operation and reads
        # the stats rarely, and applying a row's changes costs a tenth of making them.
        self._log: list[tuple[bool, int, int, int, int, int]] = []
        self._pending: set[int] = set()  # handles freed while other streams used them
        self._allocated = 0  # allocated_bytes.all.current, kept up to date for every malloc
        self._oversize_allocations = _Stat()
        self._oversize_segments = _Stat()
        self._num_alloc_retries = 0
        self._num_ooms = 0
        self._num_sync_all_streams = 0
        self._num_device_alloc = 0
        self._num_device_free = 0
        self._allowed_maximum: int | None = None  # set_per_process_memory_fraction
        #: called as hook("segment_alloc" | "segment_free", address, size) on each cudaMalloc
        #: and cudaFree of a segment (the simulator's trace listens)
        self.segment_hook: Callable[[str, int, int], None] | None = None
        self._fraction = 1.0

    # -- the counters torch.cuda exposes --------------------------------------------------

    @property
    def allocated_bytes(self) -> int:
        """Bytes in live blocks, as ``torch.cuda.memory_allocated()`` reports them."""
        return self._allocated

    @property
    def reserved_bytes(self) -> int:
        """Bytes in segments, as ``torch.cuda.memory_reserved()`` reports them."""
        return self._stats["reserved_bytes"][_ALL].current

    @property
    def peak_allocated_bytes(self) -> int:
        """Highest ``allocated_bytes`` so far (``torch.cuda.max_memory_allocated()``)."""
        return self._block_stats()["allocated_bytes"][_ALL].peak

    @property
    def peak_reserved_bytes(self) -> int:
        """Highest ``reserved_bytes`` so far (``torch.cuda.max_memory_reserved()``)."""
        return self._stats["reserved_bytes"][_ALL].peak

    @property
    def num_segments(self) -> int:
        """Segments currently held, i.e. ``cudaMalloc`` calls not yet freed."""
        return self._stats["segment"][_ALL].current

    @property
    def num_alloc_retries(self) -> int:
        """Failed ``cudaMalloc`` calls that emptied the cache and retried."""
        return self._num_alloc_retries

    @property
    def num_ooms(self) -> int:
        """Out-of-memory errors raised."""
        return self._num_ooms

    @property
    def device_free_bytes(self) -> int:
        """Device memory ``cudaMalloc`` could still get (the free of ``cudaMemGetInfo``)."""
        return self._capacity - self._reserved_outside - self.reserved_bytes

    # -- events -----------------------------------------------------------------------------

    def malloc(self, nbytes: int, *, stream: int = 0) -> int:
        """Allocate a block for a storage of ``nbytes`` on ``stream``.

        Args:
            nbytes: the storage size in bytes. Zero returns the null handle ``0`` and
                changes nothing, like ``torch.empty(0, device="cuda")``.
            stream: the stream the storage is allocated on; 0 is the default stream.
                A freed block is reused only on the stream it was allocated on.

        Returns:
            The block's handle (its simulated device address), for :meth:`free`.

        Raises:
            AllocatorOOM: if the block cannot be had even after the cache is emptied.
            ValueError: if ``nbytes`` or ``stream`` is not a non-negative integer.
        """
        if type(nbytes) is not int or nbytes < 0:  # _check_bytes's test inline: every malloc
            _check_bytes("nbytes", nbytes)
        if type(stream) is not int or stream < 0:
            _check_bytes("stream", stream)
        if nbytes == 0:
            return 0
        if self._divisions is None:
            size = -(-nbytes // _MIN_BLOCK_SIZE) * _MIN_BLOCK_SIZE  # round_size, checked above
        else:
            size = _round_divisions(nbytes, self._divisions)
        small_pool, large_pool = self._small_pool, self._large_pool
        if self._targets:
            for target, thread in zip(
                reversed(self._targets), reversed(self._target_threads), strict=True
            ):
                if thread is None or thread == threading.get_ident():
                    small_pool, large_pool, _ = self._private[target]
                    break
        pool = small_pool if size <= _SMALL_SIZE else large_pool
        block = self._get_free_block(pool, size, stream)
        if block is None:
            alloc_size = segment_size(size)
            block = self._alloc_block(pool, alloc_size, stream, retry=False)
            if block is None and self._release_available_cached_blocks(pool, size, stream):
                block = self._alloc_block(pool, alloc_size, stream, retry=False)
            if block is None:
                self._release_cached_blocks()
                block = self._alloc_block(pool, alloc_size, stream, retry=True)
            if block is None:
                self._num_ooms += 1
                raise AllocatorOOM(
                    requested=size,
                    alloc_size=alloc_size,
                    free_device=self.device_free_bytes,
                    allocated=self.allocated_bytes,
                    reserved=self.reserved_bytes,
                    capacity=self._capacity,
                    device_index=self._device_index,
                    allowed=self._allowed_maximum,
                )
        return self._alloc_found_block(pool, block, size, nbytes)

    def free(self, handle: int, *, pending: bool = False) -> None:
        """Return a block to the cache; it merges with free neighbours in its segment.

        Args:
            handle: a handle returned by :meth:`malloc`; ``0`` is a no-op.
            pending: the block was used on other streams (``Tensor.record_stream``): it
                leaves the allocation stats now, but stays out of the cache until
                :meth:`release` (c10's ``free``: events on those streams, the block reused
                once they complete).

        Raises:
            ValueError: if ``handle`` is not a live block of this allocator.
        """
        if handle == 0:
            return
        block = self._blocks.get(handle)
        if block is None or not block.allocated:
            raise ValueError(
                f"cannot free handle {handle!r}: it is not a live block of this allocator "
                "(freed already, or never returned by its malloc()); free each handle "
                "exactly once, on the allocator that returned it."
            )
        block.allocated = False
        if block.size >= self._max_split:
            self._oversize_allocations.decrease(1)
        if pending:
            block.pending = True
            self._pending.add(handle)
            self._allocated -= block.size
            self._log.append((block.small, -1, -block.size, -block.requested, 0, 0))
            return
        self._free_block(block)

    def release(self, handle: int) -> None:
        """Put a block freed with ``pending`` in the cache: the streams it was used on have
        done the work enqueued before its free (c10's ``process_events``).

        Raises:
            ValueError: if ``handle`` is not a pending block of this allocator.
        """
        block = self._blocks.get(handle)
        if block is None or not block.pending:
            raise ValueError(f"cannot release handle {handle!r}: it is not a pending block")
        block.pending = False
        self._pending.discard(handle)
        self._free_block(block, counted=True)

    @property
    def pending(self) -> frozenset[int]:
        """The handles freed with ``pending`` and not released yet."""
        return frozenset(self._pending)

    def set_memory_fraction(self, fraction: float) -> None:
        """Cap reserved memory at ``fraction`` of the device, as
        ``torch.cuda.set_per_process_memory_fraction`` does: a new segment that would take
        the reserved bytes past ``fraction * capacity`` fails like a failed ``cudaMalloc``.

        Raises:
            ValueError: if ``fraction`` is not in [0, 1].
        """
        if not 0 <= fraction <= 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        self._fraction = fraction
        self._allowed_maximum = int(fraction * self._capacity)

    @property
    def memory_fraction(self) -> float:
        """The fraction set by :meth:`set_memory_fraction` (1.0 when none was set)."""
        return self._fraction

    def empty_cache(self) -> None:
        """Release every fully free segment, as ``torch.cuda.empty_cache()`` does (after
        waiting for the pending blocks' streams: c10's ``synchronize_and_free_events``)."""
        for handle in sorted(self._pending):
            self.release(handle)
        self._release_cached_blocks()

    def reset_accumulated_stats(self) -> None:
        """Zero the totals allocated and freed of every stat and the event counters, as
        ``torch.cuda.reset_accumulated_memory_stats()`` does (``resetAccumulatedStats``)."""
        for array in self._block_stats().values():
            for stat in array:
                stat.allocated = stat.freed = 0
        for stat in (self._oversize_allocations, self._oversize_segments):
            stat.allocated = stat.freed = 0
        self._num_alloc_retries = self._num_ooms = self._num_sync_all_streams = 0
        self._num_device_alloc = self._num_device_free = 0

    # -- private pools (torch.cuda.MemPool, CUDA graphs) ----------------------------------------

    def begin_allocate_to_pool(
        self, pool_id: tuple[int, int], *, thread: int | None = None
    ) -> None:
        """Serve the following requests from private pool ``pool_id`` (made on first use,
        with one user) until :meth:`end_allocate_to_pool`: those of every thread, or only
        those of ``thread`` (a ``threading.get_ident()``)."""
        if pool_id not in self._private:
            self._private[pool_id] = [
                _Pool(small=True, owner=pool_id),
                _Pool(small=False, owner=pool_id),
                1,
            ]
        self._targets.append(pool_id)
        self._target_threads.append(thread)

    def end_allocate_to_pool(self, pool_id: tuple[int, int]) -> None:
        """Stop allocating to ``pool_id`` (the latest :meth:`begin_allocate_to_pool` of it)."""
        for i in range(len(self._targets) - 1, -1, -1):
            if self._targets[i] == pool_id:
                del self._targets[i], self._target_threads[i]
                return

    def use_pool(self, pool_id: tuple[int, int]) -> None:
        """One more user of a private pool (a graph that shares it)."""
        if pool_id in self._private:
            self._private[pool_id][2] += 1
        else:
            self._private[pool_id] = [
                _Pool(small=True, owner=pool_id),
                _Pool(small=False, owner=pool_id),
                1,
            ]

    def release_pool(self, pool_id: tuple[int, int]) -> None:
        """One user fewer; a pool no one uses gives its free segments back at the next
        :meth:`empty_cache`."""
        entry = self._private.get(pool_id)
        if entry is not None and entry[2] > 0:
            entry[2] -= 1

    def configure(
        self,
        *,
        max_split_size: int | None = None,
        max_non_split_rounding: int = _LARGE_BUFFER,
        roundup_power2_divisions: list[int] | None = None,
    ) -> None:
        """Change the settings ``PYTORCH_ALLOC_CONF`` (``torch.cuda.memory.
        _set_allocator_settings``) gives: ``max_split_size`` (None: unlimited),
        ``max_non_split_rounding`` and ``roundup_power2_divisions`` (16 division counts,
        for the power-of-two size intervals from 1 MiB to 64 GiB; None: round to 512 bytes).
        """
        self._max_split = _UNLIMITED if max_split_size is None else max_split_size
        self._max_non_split_rounding = max_non_split_rounding
        if roundup_power2_divisions is not None and not any(roundup_power2_divisions):
            roundup_power2_divisions = None
        self._divisions = roundup_power2_divisions

    def reserve_outside(self, nbytes: int) -> None:
        """Device memory taken (``nbytes`` > 0) or given back (< 0) past the cache: a
        ``cudaMalloc`` of the caller's own, as ``raw_alloc`` makes with caching off."""
        if nbytes > self.device_free_bytes:
            raise AllocatorOOM(
                requested=nbytes,
                alloc_size=nbytes,
                free_device=self.device_free_bytes,
                allocated=self.allocated_bytes,
                reserved=self.reserved_bytes,
                capacity=self._capacity,
                device_index=self._device_index,
            )
        self._reserved_outside += nbytes

    def pool_of(self, handle: int) -> tuple[int, int] | None:
        """The private pool a block belongs to (None: the ordinary pools, or no block)."""
        block = self._blocks.get(handle)
        return None if block is None else block.owner

    def live_in_pool(self, pool_id: tuple[int, int]) -> set[int]:
        """The addresses of the live blocks of private pool ``pool_id`` (c10's
        checkPoolLiveAllocations: "Could not find pool of id" for a pool never made)."""
        if pool_id not in self._private:
            raise RuntimeError("Could not find pool of id")
        return {a for a, b in self._blocks.items() if b.allocated and b.owner == pool_id}

    def checkpoint_state(self, pool_id: tuple[int, int]) -> PoolCheckpoint:
        """The state of private pool ``pool_id``'s segments, to return them to it later
        (c10/cuda/CUDACachingAllocator.cpp ``getCheckpointState``: a ``PrivatePoolState`` of
        each segment's blocks, their pointer, size, stream and whether allocated)."""
        entry = self._private.get(pool_id)
        if entry is None:
            raise RuntimeError("Could not find pool of id")
        if entry[2] == 0:  # a pool no one uses waits in c10's graph_pools_freeable
            raise RuntimeError("Not expected to checkpoint freeable graph")
        segments = []
        for address in sorted(self._segments):
            block: _Block | None = self._blocks[address]
            if block is None or block.owner != pool_id:
                continue
            blocks = []
            while block is not None:
                blocks.append((block.address, block.size, block.stream, block.allocated))
                block = block.next
            segments.append(tuple(blocks))
        return PoolCheckpoint(pool_id, self._device_index, tuple(segments))

    def set_checkpoint_state(self, checkpoint: PoolCheckpoint) -> tuple[list[int], list[int]]:
        """Return private pool ``checkpoint.pool_id`` to ``checkpoint``: free every block
        allocated in it now, then allocate the checkpoint's blocks again, each at its
        address, and free those the checkpoint had free (c10/cuda/CUDACachingAllocator.cpp
        ``setCheckpointPoolState``, ``freeBlocksAllocatedToPool``,
        ``setSegmentStateToCheckpoint``). Returns the addresses freed and those allocated
        (c10's ``RestoreResult``: ``allocations_freed``, ``allocations_created``)."""
        pool_id = checkpoint.pool_id
        entry = self._private.get(pool_id)
        if entry is not None and entry[2] == 0:
            raise RuntimeError("Not expected to checkpoint freeable graph")
        if entry is None:
            raise RuntimeError("Could not find private pool id")
        freed = [a for a, b in self._blocks.items() if b.allocated and b.owner == pool_id]
        freed.sort()
        for address in freed:
            self.free(address)
        created: list[int] = []
        for segment in checkpoint.segments:
            head = self._blocks.get(segment[0][0])
            if head is None or head.allocated or head.owner != pool_id:
                raise RuntimeError(f" could not find {segment[0][0]:#x}")
            block: _Block | None = head
            for i, (address, size, _stream, _allocated) in enumerate(segment):
                if block is None or block.address != address or block.size < size:
                    raise RuntimeError(
                        f"the pool's segment at {segment[0][0]:#x} no longer has the "
                        "checkpoint's blocks"
                    )
                pool = self._pool_of(block)
                pool.remove(block)
                # split while the block is larger than the checkpoint's: the rest belongs
                # to the next block (max_split_size may have changed since)
                self._alloc_found_block(pool, block, size, size, split=block.size > size)
                block = self._blocks[address].next
                if (block is not None) != (i + 1 < len(segment)):
                    raise RuntimeError("a checkpointed segment's blocks do not match it")
            for address, _size, _stream, allocated in segment:
                if allocated:
                    created.append(address)
                else:
                    self.free(address)
        return freed, created

    def set_no_split(self, pool_id: tuple[int, int]) -> None:
        """Private pool ``pool_id`` never splits a block: each request takes a whole
        segment (``torch.cuda.MemPool(no_split=True)``, c10's ``setNoSplit``)."""
        self._no_split.add(pool_id)

    def pool_use_count(self, pool_id: tuple[int, int]) -> int:
        entry = self._private.get(pool_id)
        return 0 if entry is None else int(entry[2])

    def reset_peak_stats(self) -> None:
        """Set every peak to its current value (``torch.cuda.reset_peak_memory_stats()``)."""
        for array in self._block_stats().values():
            for stat in array:
                stat.peak = stat.current
        for stat in (self._oversize_allocations, self._oversize_segments):
            stat.peak = stat.current

    # -- reports ------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Return the statistics under the keys ``torch.cuda.memory_stats()`` uses.

        Returns:
            A dict sorted by key: ``"<stat>.<pool>.<metric>"`` for the stats
            ``allocation, segment, active, inactive_split, allocated_bytes,
            reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes``, the
            pools ``all, small_pool, large_pool`` and the metrics ``current, peak,
            allocated, freed``; ``oversize_allocations.<metric>``,
            ``oversize_segments.<metric>``; and the counters ``num_alloc_retries,
            num_ooms, num_sync_all_streams, num_device_alloc, num_device_free,
            num_oom_rejections, max_split_size`` (-1 when unlimited, as PyTorch reports).

        Examples:
            >>> model = CachingAllocatorModel(1024**3)
            >>> _ = model.malloc(1000)
            >>> s = model.stats()
            >>> s["allocated_bytes.all.current"], s["requested_bytes.all.current"]
            (1024, 1000)
            >>> s["reserved_bytes.small_pool.peak"], s["max_split_size"]
            (2097152, -1)
        """
        result: dict[str, int] = {}
        for name, array in self._block_stats().items():
            for pool_name, stat in zip(_POOL_NAMES, array, strict=True):
                stat.export(f"{name}.{pool_name}", result)
                if name in _SAME_AS:
                    stat.export(f"{_SAME_AS[name]}.{pool_name}", result)
        self._oversize_allocations.export("oversize_allocations", result)
        self._oversize_segments.export("oversize_segments", result)
        result["num_alloc_retries"] = self._num_alloc_retries
        result["num_ooms"] = self._num_ooms
        result["num_sync_all_streams"] = self._num_sync_all_streams
        result["num_device_alloc"] = self._num_device_alloc
        result["num_device_free"] = self._num_device_free
        result["num_oom_rejections"] = 0  # needs a per-process memory fraction: not modelled
        # PyTorch stores SIZE_MAX in an int64, which reads back as -1.
        result["max_split_size"] = -1 if self._max_split == _UNLIMITED else self._max_split
        return dict(sorted(result.items()))

    def snapshot(self) -> list[dict[str, Any]]:
        """Return the segments in the shape of ``torch.cuda.memory._snapshot()["segments"]``.

        Returns:
            One dict per segment, by address: ``device, address, total_size,
            allocated_size, active_size, requested_size, stream, segment_type ("small" or
            "large"), segment_pool_id, is_expandable, frames`` and ``blocks``, each block a
            dict ``address, size, requested_size, state ("active_allocated",
            "active_pending_free": freed, waiting for other streams, or "inactive"),
            frames``. Stack frames are not recorded (empty lists), and
            ``requested_size`` of an inactive block is 0.

        Examples:
            >>> model = CachingAllocatorModel(1024**3)
            >>> _ = model.malloc(4)
            >>> [(b["size"], b["state"]) for b in model.snapshot()[0]["blocks"]]
            [(512, 'active_allocated'), (2096640, 'inactive')]
        """
        segments: list[dict[str, Any]] = []
        for address in sorted(self._segments):
            block: _Block | None = self._blocks[address]
            blocks: list[dict[str, Any]] = []
            allocated = requested = active = 0
            head = self._blocks[address]
            while block is not None:
                blocks.append(
                    {
                        "address": block.address,
                        "size": block.size,
                        "requested_size": block.requested,
                        "state": "active_allocated"
                        if block.allocated
                        else "active_pending_free"
                        if block.pending
                        else "inactive",
                        "frames": [],
                    }
                )
                if block.allocated:
                    allocated += block.size
                    requested += block.requested
                if block.allocated or block.pending:
                    active += block.size
                block = block.next
            segments.append(
                {
                    "device": self._device_index,
                    "address": address,
                    "total_size": self._segments[address],
                    "allocated_size": allocated,
                    "active_size": active,
                    "requested_size": requested,
                    "stream": head.stream,
                    "segment_type": "small" if head.small else "large",
                    "segment_pool_id": head.owner or (0, 0),
                    "is_expandable": False,
                    "frames": [],
                    "blocks": blocks,
                }
            )
        return segments

    # -- the allocator's private steps, named after CUDACachingAllocator.cpp -------------------

    def _get_free_block(self, pool: _Pool, size: int, stream: int) -> _Block | None:
        keys = pool.keys
        i = bisect_left(keys, (stream, size, 0))
        if i == len(keys) or keys[i][0] != stream:
            return None
        found_size = keys[i][1]
        # An oversize block never serves a smaller request, and serves a large one only
        # when it is not too much bigger.
        if size < self._max_split <= found_size:
            return None
        if size >= self._max_split and found_size >= size + self._max_non_split_rounding:
            return None
        address = keys[i][2]
        del keys[i]
        return self._blocks[address]

    def _alloc_block(
        self, pool: _Pool, alloc_size: int, stream: int, *, retry: bool
    ) -> _Block | None:
        """cudaMalloc a new segment; ``None`` when the device has no room for it."""
        if retry:
            self._num_alloc_retries += 1
        if alloc_size > self.device_free_bytes:
            return None
        if (
            self._allowed_maximum is not None
            and self.reserved_bytes + alloc_size > self._allowed_maximum
        ):
            return None
        address = self._next_address
        self._next_address += alloc_size
        block = _Block(address, alloc_size, stream, pool.small)
        block.owner = pool.owner
        self._blocks[address] = block
        self._segments[address] = alloc_size
        pool_index = _SMALL if pool.small else _LARGE
        self._stats["segment"].increase(pool_index, 1)
        self._stats["reserved_bytes"].increase(pool_index, alloc_size)
        if alloc_size >= self._max_split:
            self._oversize_segments.increase(1)
        self._num_device_alloc += 1
        if self.segment_hook is not None:
            self.segment_hook("segment_alloc", address, alloc_size)
        return block

    def _alloc_found_block(
        self, pool: _Pool, block: _Block, size: int, nbytes: int, *, split: bool | None = None
    ) -> int:
        """Hand out ``block``, first splitting off what the request does not need (or as
        ``split`` says)."""
        already_split = block.prev is not None or block.next is not None
        remaining_size = block.size - size
        if split is not None:
            pass
        elif block.owner is not None and block.owner in self._no_split:
            split = False  # CUDACachingAllocator.cpp should_split: no_split_pools first
        elif pool.small:
            split = remaining_size >= _MIN_BLOCK_SIZE
        else:
            split = size < self._max_split and remaining_size > _SMALL_SIZE
        split_blocks = split_bytes = 0  # the changes of inactive_split and its bytes
        if split:
            if not already_split:
                self.split_segments.add(block.address)  # the whole segment, split first now
            remaining = block
            block = _Block(remaining.address, size, remaining.stream, remaining.small)
            block.owner = remaining.owner
            block.prev = remaining.prev
            if block.prev is not None:
                block.prev.next = block
            block.next = remaining
            remaining.prev = block
            remaining.address += size
            remaining.size = remaining_size
            self._blocks[block.address] = block
            self._blocks[remaining.address] = remaining
            insort(pool.keys, (remaining.stream, remaining.size, remaining.address))
            if already_split:
                split_bytes = -size
            else:
                split_blocks, split_bytes = 1, remaining_size
        elif already_split:
            split_blocks, split_bytes = -1, -block.size
        block.allocated = True
        block.requested = nbytes
        self._allocated += block.size
        self._log.append((pool.small, 1, block.size, nbytes, split_blocks, split_bytes))
        if len(self._log) >= _LOG_ROWS:
            self._block_stats()
        if block.size >= self._max_split:
            self._oversize_allocations.increase(1)
        return block.address

    def _free_block(self, block: _Block, *, counted: bool = False) -> None:
        """Put a no-longer-live block back in its pool, merged with free neighbours
        (``counted``: its free already left the allocation stats)."""
        pool = self._pool_of(block)
        original_size, requested = (0, 0) if counted else (block.size, block.requested)
        net_blocks = net_bytes = 0
        for candidate in (block.prev, block.next):
            if candidate is not None and not candidate.allocated and not candidate.pending:
                net_blocks -= 1
                net_bytes -= self._try_merge_blocks(block, candidate, pool)
        # block.requested stays: c10's free_block leaves requested_size, and its snapshot
        # reports the last request of a cached block (merges keep the freed block's)
        insort(pool.keys, (block.stream, block.size, block.address))
        if block.prev is not None or block.next is not None:
            net_blocks += 1
            net_bytes += block.size
        self._allocated -= original_size
        freed = 0 if counted else -1
        self._log.append((block.small, freed, -original_size, -requested, net_blocks, net_bytes))

    def _pool_of(self, block: _Block) -> _Pool:
        if block.owner is None:
            return self._small_pool if block.small else self._large_pool
        small, large, _ = self._private[block.owner]
        return small if block.small else large

    def _block_stats(self) -> dict[str, _StatArray]:
        """The stats, with the logged changes of the block stats applied (in order, each
        change one c10 ``increase_stat``/``decrease_stat`` call on the pool's stat and on
        the aggregate)."""
        if self._log:
            small, *changes = zip(*self._log, strict=True)
            large = [not s for s in small]
            self._log = []
            for name, column in zip(_LOGGED_STATS, changes, strict=True):
                array = self._stats[name]
                array[_ALL].apply(column)
                array[_SMALL].apply(compress(column, small))
                array[_LARGE].apply(compress(column, large))
        return self._stats

    def _try_merge_blocks(self, dst: _Block, src: _Block, pool: _Pool) -> int:
        """Absorb the free neighbour ``src`` into ``dst``; return the bytes absorbed."""
        pool.remove(src)
        del self._blocks[src.address]
        if dst.prev is src:  # [src dst]
            del self._blocks[dst.address]
            dst.address = src.address
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
            self._blocks[dst.address] = dst
        else:  # [dst src]
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        dst.size += src.size
        return src.size

    def _release_available_cached_blocks(self, pool: _Pool, size: int, stream: int) -> bool:
        """With a max_split_size, free oversize cached blocks until ``size`` bytes are back."""
        if self._max_split == _UNLIMITED:
            return False
        key_size = max(size, self._max_split)
        keys = pool.keys
        i = bisect_left(keys, (stream, key_size, 0))
        if i < len(keys) and keys[i][0] == stream:
            self._release_block(pool, self._blocks[keys[i][2]])
            return True
        # No single block is large enough: free oversize blocks, largest first.
        released = 0
        i -= 1
        while i >= 0 and released < key_size:
            block_stream, block_size, address = keys[i]
            if block_stream != stream or block_size < self._max_split:
                break
            self._release_block(pool, self._blocks[address])
            released += block_size
            i -= 1
        return released >= key_size

    def _release_cached_blocks(self) -> None:
        """Free every cached block that is a whole segment (``emptyCache``)."""
        self._num_sync_all_streams += 1
        pools = [self._large_pool, self._small_pool]
        for pool_id, (small, large, users) in list(self._private.items()):
            if users == 0 and pool_id not in self._targets:
                pools += [large, small]
        for pool in pools:
            kept: list[tuple[int, int, int]] = []
            for key in pool.keys:
                block = self._blocks[key[2]]
                if block.prev is None and block.next is None:
                    self._forget_segment(block)
                else:
                    kept.append(key)
            pool.keys = kept

    def _release_block(self, pool: _Pool, block: _Block) -> None:
        """cudaFree a cached block that is a whole segment."""
        # Oversize blocks are never split (max_split_size >= 20 MiB sees to that).
        assert block.prev is None and block.next is None
        pool.remove(block)
        self._forget_segment(block)

    def _forget_segment(self, block: _Block) -> None:
        del self._blocks[block.address]
        del self._segments[block.address]
        pool_index = _SMALL if block.small else _LARGE
        self._stats["segment"].decrease(pool_index, 1)
        self._stats["reserved_bytes"].decrease(pool_index, block.size)
        if block.size >= self._max_split:
            self._oversize_segments.decrease(1)
        self._num_device_free += 1
        if self.segment_hook is not None:
            self.segment_hook("segment_free", block.address, block.size)
        self.split_segments.discard(block.address)


# -- data structures ------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolCheckpoint:
    """A private pool's segments at a moment: per segment, its blocks' ``(address, size,
    stream, allocated)`` in address order (c10's ``PrivatePoolState`` / ``SegmentState``)."""

    pool_id: tuple[int, int]
    device: int
    segments: tuple[tuple[tuple[int, int, int, bool], ...], ...]


class _Block:
    """A piece of a segment: live (``allocated``) or cached in its pool."""

    __slots__ = (
        "address", "allocated", "next", "owner", "pending", "prev", "requested", "size", "small",
        "stream",
    )  # fmt: skip

    def __init__(self, address: int, size: int, stream: int, small: bool) -> None:
        self.address = address
        self.size = size
        self.stream = stream
        self.small = small
        self.allocated = False
        self.pending = False  # freed, held from reuse until other streams' work is done
        self.requested = 0  # bytes asked for when last handed out (kept once cached, as c10)
        self.owner: tuple[int, int] | None = None  # its private pool, if any
        self.prev: _Block | None = None  # neighbours in the same segment
        self.next: _Block | None = None


class _Pool:
    """The free blocks of one pool, sorted like the real ``std::set<Block*>``."""

    __slots__ = ("keys", "owner", "small")

    def __init__(self, *, small: bool, owner: tuple[int, int] | None = None) -> None:
        self.small = small
        self.owner = owner
        # (stream, size, address) of each free block; a block goes in with insort
        self.keys: list[tuple[int, int, int]] = []

    def remove(self, block: _Block) -> None:
        key = (block.stream, block.size, block.address)
        i = bisect_left(self.keys, key)
        assert self.keys[i] == key, "a cached block is missing from its pool"
        del self.keys[i]


_STAT_ARRAYS = (
    "allocation",
    "segment",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "inactive_split_bytes",
    "requested_bytes",
)
# The stats every malloc and free changes, logged in this order (after the pool's flag);
# the segment stats change with cudaMalloc/cudaFree only and are updated at once.
_LOGGED_STATS = (
    "allocation",
    "allocated_bytes",
    "requested_bytes",
    "inactive_split",
    "inactive_split_bytes",
)
_LOG_ROWS = 8192  # rows kept before they are applied
_POSITIVE = (0).__lt__
# c10's "active" stats count blocks in use or waiting for a stream's event before they may
# be reused (record_stream); without streams to wait for they are the allocation stats.
_SAME_AS = {"allocation": "active", "allocated_bytes": "active_bytes"}


class _Stat:
    """c10's ``Stat``: current value, peak, total increase and total decrease."""

    __slots__ = ("allocated", "current", "freed", "peak")

    def __init__(self) -> None:
        self.current = self.peak = self.allocated = self.freed = 0

    def increase(self, amount: int) -> None:
        self.current += amount
        if self.current > self.peak:
            self.peak = self.current
        self.allocated += amount

    def decrease(self, amount: int) -> None:
        self.current -= amount
        self.freed += amount

    def apply(self, changes: Iterable[int]) -> None:
        """``increase`` each positive change and ``decrease`` each negative one, in order."""
        changes = list(changes)
        self.peak = max(self.peak, max(accumulate(changes, initial=self.current)))
        total, increases = sum(changes), sum(filter(_POSITIVE, changes))
        self.current += total
        self.allocated += increases
        self.freed += increases - total

    def export(self, prefix: str, into: dict[str, int]) -> None:
        into[f"{prefix}.current"] = self.current
        into[f"{prefix}.peak"] = self.peak
        into[f"{prefix}.allocated"] = self.allocated
        into[f"{prefix}.freed"] = self.freed


class _StatArray(list[_Stat]):
    """c10's ``StatArray``: one stat for all pools, the small pool and the large pool."""

    def __init__(self) -> None:
        super().__init__(_Stat() for _ in _POOL_NAMES)

    def increase(self, pool_index: int, amount: int) -> None:
        self[_ALL].increase(amount)
        self[pool_index].increase(amount)

    def decrease(self, pool_index: int, amount: int) -> None:
        self[_ALL].decrease(amount)
        self[pool_index].decrease(amount)


def _format_size(nbytes: int) -> str:
    """Format like ``c10::CachingAllocator::format_size`` (bytes, then KiB/MiB/GiB, 2 places)."""
    if nbytes <= 1024:
        return f"{nbytes} bytes"
    if nbytes <= 1024**2:
        return f"{nbytes / 1024:.2f} KiB"
    if nbytes <= 1024**3:
        return f"{nbytes / 1024**2:.2f} MiB"
    return f"{nbytes / 1024**3:.2f} GiB"


def _check_bytes(name: str, value: object) -> None:
    if type(value) is int and value >= 0:  # the common case, first: every malloc checks
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}.")
