"""Private memory pools through torch's Python over the emulated allocator bindings: which
allocations a pool serves, and which of its blocks are live (c10/cuda/CUDACachingAllocator.cpp
and the bindings torch/csrc/cuda/Module.cpp gives it)."""

from __future__ import annotations

import threading

import pytest
import torch

from torchplace.sim import simulate


def _pool_of(ptr: int) -> tuple[int, int]:
    for segment in torch.cuda.memory_snapshot():
        for block in segment["blocks"]:
            if block["address"] == ptr:
                return tuple(segment["segment_pool_id"])  # type: ignore[return-value]
    raise AssertionError(f"no block at {ptr:#x}")


def test_live_allocations_of_a_mempool() -> None:
    # checkPoolLiveAllocations: True exactly when the pool's allocated blocks are the
    # pointers given, no more and no fewer; a pool never made: "Could not find pool of id"
    with simulate("H100", gpus=2):
        pool = torch.cuda.MemPool()
        with torch.cuda.device(1), torch.cuda.use_mem_pool(pool):
            a = torch.empty(1000, device="cuda")
            b = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")  # a large block
        outside = torch.empty(8, device="cuda:1")
        check = torch._C._cuda_checkPoolLiveAllocations
        assert check(1, pool.id, {a.data_ptr(), b.data_ptr()})
        assert not check(1, pool.id, {a.data_ptr()})
        assert not check(1, pool.id, {a.data_ptr(), b.data_ptr(), outside.data_ptr()})
        del a
        assert check(1, pool.id, {b.data_ptr()})
        with pytest.raises(RuntimeError, match="Could not find pool of id"):
            check(1, torch.cuda.graph_pool_handle(), set())  # an id, no pool yet


def test_allocating_to_a_pool_from_one_thread() -> None:
    # Module.cpp _cuda_beginAllocateCurrentThreadToPool: the pool's filter admits only the
    # calling thread; others allocate from the ordinary pools meanwhile
    with simulate("H100"):
        pool = torch.cuda.graph_pool_handle()
        torch._C._cuda_beginAllocateCurrentThreadToPool(0, pool)
        try:
            mine = torch.empty(256, device="cuda")
            other: list[torch.Tensor] = []
            worker = threading.Thread(target=lambda: other.append(torch.empty(256, device="cuda")))
            worker.start()
            worker.join()
        finally:
            torch._C._cuda_endAllocateToPool(0, pool)
            torch._C._cuda_releasePool(0, pool)
        assert _pool_of(mine.data_ptr()) == tuple(pool)
        assert _pool_of(other[0].data_ptr()) == (0, 0)
        after = torch.empty(256, device="cuda")  # the pool serves no one once ended
        assert _pool_of(after.data_ptr()) == (0, 0)
