"""Page-locked (pinned) host memory on a simulated CUDA machine: the CUDA host caching
allocator, emulated with real host memory.

``Tensor.pin_memory()`` and ``pin_memory=True`` take their memory from here, as from
c10/core/CachingHostAllocator.h: a request takes a block rounded up to a power of two,
reusing a cached free block of that size (the same address) before it allocates a new one;
a freed block stays cached until ``torch._C._host_emptyCache()``; a block a non-blocking
copy used is reused only once that copy's stream has passed it (``record_event``). Memory
registered with ``cudaHostRegister`` counts as pinned too. CUDA refuses a copy between
unpinned host memory and the GPU while a graph is captured (aten/src/ATen/native/cuda/
Copy.cu), and so does the simulator.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import torch

__all__ = ["PinnedHostMemory"]


def _power_of_two(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class _Block:
    """One cached block: real host memory, and the GPU work that still reads it."""

    __slots__ = ("captured", "memory", "pool", "size", "uses")

    def __init__(self, size: int, pool: tuple[int, int] | None) -> None:
        self.size, self.pool = size, pool
        self.memory = torch.empty(size, dtype=torch.uint8)  # owns the bytes
        self.uses: list[tuple[int, float]] = []  # (device, GPU time its copy ends)
        self.captured = False  # a captured copy uses it: every replay will


class PinnedHostMemory:
    """The host caching allocator of one simulation (module docstring)."""

    _STATS = ("allocations", "allocated_bytes", "active_requests", "active_bytes")

    def __init__(self, timeline: Any = None, capturing: Any = None) -> None:
        # timeline: the streams' GPU times (Timeline); capturing(device): whether the
        # device's current stream captures a CUDA graph
        self._timeline = timeline
        self._capturing = capturing or (lambda device: False)
        self._pinned: weakref.WeakSet[Any] = weakref.WeakSet()
        self._by_storage: dict[int, _Block] = {}  # id of a live storage -> its block
        self._registered: dict[int, int] = {}  # cudaHostRegister: pointer -> size
        # cached free blocks by (private pool, size): a CUDA graph's pinned memory is its
        # pool's (begin_allocate_to_pool), reused only by captures into the same pool
        self._free: dict[tuple[tuple[int, int] | None, int], list[_Block]] = {}
        self._pending: list[_Block] = []  # freed, but a copy on a stream still reads it
        self._targets: dict[int, tuple[int, int]] = {}  # capturing thread -> its pool
        self._lock = threading.Lock()
        self.reset_accumulated()

    # --- statistics (torch.cuda.host_memory_stats) -------------------------------------
    def reset_accumulated(self) -> None:
        with self._lock:
            current = {k: getattr(self, "_stats", {}).get(k, [0])[0] for k in self._STATS}
            self._stats = {k: [current[k], current[k], current[k], 0] for k in self._STATS}
            self._counts = {"num_host_alloc": 0, "num_host_free": 0}

    def reset_peak(self) -> None:
        with self._lock:
            for stat in self._stats.values():
                stat[1] = stat[0]

    def _change(self, name: str, amount: int) -> None:
        stat = self._stats[name]  # current, peak, allocated, freed
        stat[0] += amount
        stat[1] = max(stat[1], stat[0])
        if amount > 0:
            stat[2] += amount
        else:
            stat[3] -= amount

    def stats(self) -> dict[str, Any]:
        """As ``torch._C._cuda_hostMemoryStats()`` returns them (nested)."""
        with self._lock:
            out: dict[str, Any] = {
                name: dict(zip(("current", "peak", "allocated", "freed"), stat, strict=True))
                for name, stat in self._stats.items()
            }
            out.update(self._counts)
            for timing in ("host_alloc_time", "host_free_time"):
                key = "num_host_alloc" if timing == "host_alloc_time" else "num_host_free"
                out[timing] = {"total": 0, "max": 0, "min": 0, "count": self._counts[key], "avg": 0}
            return out

    # --- allocation -------------------------------------------------------------------
    def _collect(self) -> None:
        """Cache the freed blocks whose copies have finished (process_events)."""
        still = []
        for block in self._pending:
            timeline = self._timeline
            block.uses = [u for u in block.uses if timeline and not timeline.complete(*u)]
            if block.uses or block.captured:
                still.append(block)
            else:
                self._free.setdefault((block.pool, block.size), []).append(block)
        self._pending = still

    def pin(self, t: torch.Tensor) -> torch.Tensor:
        """A pinned copy of host tensor ``t``, in memory from the cache."""
        meta = torch.empty_like(t, device="meta")
        nbytes = meta.untyped_storage().nbytes()
        if nbytes == 0:  # an empty tensor: no block
            out = t.clone()
            self._pinned.add(out.untyped_storage())
            return out
        size = _power_of_two(nbytes)
        pool = self._targets.get(threading.get_ident())
        with self._lock:
            self._collect()
            cached = self._free.get((pool, size))
            if cached:
                block = cached.pop()
            else:
                block = _Block(size, pool)
                self._counts["num_host_alloc"] += 1
                self._change("allocations", 1)
                self._change("allocated_bytes", size)
            self._change("active_requests", 1)
            self._change("active_bytes", size)
        # a storage of the requested size over the block's bytes: it dies with its tensors,
        # and the block goes back to the cache, its address to be reused
        view = (ctypes.c_char * nbytes).from_address(block.memory.data_ptr())
        storage = torch.frombuffer(view, dtype=torch.uint8, count=nbytes).untyped_storage()
        out = torch.empty(0, dtype=t.dtype).set_(storage, 0, meta.shape, meta.stride())
        with torch.no_grad():
            out.copy_(t)
        self._pinned.add(storage)
        self._by_storage[id(storage)] = block
        weakref.finalize(storage, self._release, id(storage))
        return out

    def _release(self, key: int) -> None:
        block = self._by_storage.pop(key, None)
        if block is None:
            return
        with self._lock:
            self._change("active_requests", -1)
            self._change("active_bytes", -block.size)
            self._pending.append(block)
            self._collect()

    def empty_cache(self) -> None:
        """Give the cached free blocks back (those of private pools stay theirs)."""
        with self._lock:
            self._collect()
            for (pool, size), blocks in list(self._free.items()):
                if pool is not None:
                    continue
                n = len(blocks)
                self._counts["num_host_free"] += n
                self._change("allocations", -n)
                self._change("allocated_bytes", -n * size)
                del self._free[(pool, size)]

    # --- CUDA graphs' private pools ---------------------------------------------------
    def begin_allocate_to_pool(self, pool: tuple[int, int]) -> None:
        self._targets[threading.get_ident()] = pool

    def end_allocate_to_pool(self, pool: tuple[int, int]) -> None:
        self._targets = {k: v for k, v in self._targets.items() if v != pool}

    def release_pool(self, pool: tuple[int, int]) -> None:
        """The pool's graphs are gone: its blocks become ordinary cached blocks."""
        with self._lock:
            for block in self._pending:
                if block.pool == pool:
                    block.pool, block.captured = None, False
            for (owner, size), blocks in list(self._free.items()):
                if owner == pool:
                    self._free.setdefault((None, size), []).extend(blocks)
                    del self._free[(owner, size)]
            for block in self._by_storage.values():
                if block.pool == pool:
                    block.pool, block.captured = None, False
            self._collect()

    # --- uses by the GPU --------------------------------------------------------------
    def copied(self, host: torch.Tensor, device: int, non_blocking: bool) -> None:
        """A copy between host tensor ``host`` and simulated GPU ``device`` was enqueued."""
        storage = host.untyped_storage()
        if self._capturing(device) and storage not in self:
            raise RuntimeError(
                "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless "
                "the CPU tensor is pinned."
            )
        block = self._by_storage.get(id(storage))
        if block is not None and self._capturing(device):
            block.captured = True  # every replay copies it: never reused while the pool is
        if non_blocking and block is not None and self._timeline is not None:
            # the copy reads (writes) the block until its stream gets there (record_event)
            timeline = self._timeline
            block.uses.append((device, timeline.tail(device, timeline.current(device))))

    # --- cudaHostRegister -------------------------------------------------------------
    def register(self, ptr: int, size: int) -> None:
        self._registered[ptr] = size

    def unregister(self, ptr: int) -> bool:
        return self._registered.pop(ptr, None) is not None

    def __contains__(self, storage: Any) -> bool:
        if storage in self._pinned:
            return True
        if not self._registered:
            return False
        ptr = storage.data_ptr()
        return any(p <= ptr < p + n for p, n in self._registered.items())
