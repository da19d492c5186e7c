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


def _pool_blocks(pool: tuple[int, int]) -> list[list[tuple[int, int, str]]]:
    return [
        [(b["address"], b["size"], b["state"]) for b in segment["blocks"]]
        for segment in torch.cuda.memory_snapshot()
        if tuple(segment["segment_pool_id"]) == tuple(pool)
    ]


def test_checkpoint_returns_a_mempool_to_its_blocks() -> None:
    # CUDACachingAllocator.cpp setCheckpointPoolState on a user pool of device 1: the blocks
    # allocated since are freed (the stale storages stop owning theirs), the checkpoint's
    # live blocks are allocated again at their addresses, owned by no storage
    with simulate("H100", gpus=2):
        with torch.cuda.device(1):  # the pool's device (c10's MemPool holds its device's)
            pool = torch.cuda.MemPool()
        with torch.cuda.device(1), torch.cuda.use_mem_pool(pool):
            a = torch.empty(300, device="cuda")
            b = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
        with pytest.raises(RuntimeError, match="Could not find pool of id"):
            torch._C._cuda_getCheckpointState(0, pool.id)  # device 0's allocator has none
        before = _pool_blocks(pool.id)
        state = torch._C._cuda_getCheckpointState(1, pool.id)
        assert type(state).__name__ == "_cuda_CUDAAllocator_AllocatorState"
        with torch.cuda.device(1), torch.cuda.use_mem_pool(pool):
            c = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
        b_ptr = b.data_ptr()
        del b  # dies after the checkpoint: its block is allocated again, owned by no one
        with pytest.raises(RuntimeError, match="stale tensors which are being manually freed"):
            torch._C._cuda_setCheckpointPoolState(1, state, [], [])
        torch._C._cuda_setCheckpointPoolState(1, state, [c.untyped_storage()._cdata], [])
        assert _pool_blocks(pool.id) == before
        check = torch._C._cuda_checkPoolLiveAllocations
        assert check(1, pool.id, {a.data_ptr(), b_ptr})
        del c  # its block went back at the checkpoint: its death frees nothing
        assert check(1, pool.id, {a.data_ptr(), b_ptr})
        torch._C._cuda_cudaCachingAllocator_raw_delete(b_ptr)
        assert check(1, pool.id, {a.data_ptr()})
        del a
        assert check(1, pool.id, set())


def test_checkpoint_of_a_pool_never_made() -> None:
    with simulate("H100"), pytest.raises(RuntimeError, match="Could not find pool of id"):
        torch._C._cuda_getCheckpointState(0, torch.cuda.graph_pool_handle())


def test_a_no_split_pool_gives_each_small_request_a_segment() -> None:
    # CUDACachingAllocator.cpp should_split: a no_split pool never splits, so each small
    # request takes a whole 2 MiB segment; an ordinary pool packs them into one
    with simulate("H100"):
        split, no_split = torch.cuda.MemPool(), torch.cuda.MemPool(no_split=True)
        kept = []
        for pool in (split, no_split):
            with torch.cuda.use_mem_pool(pool):
                kept += [torch.empty(100, device="cuda") for _ in range(3)]
        assert [len(s) for s in _pool_blocks(split.id)] == [4]  # 3 blocks and the rest
        assert [[size for _, size, _ in s] for s in _pool_blocks(no_split.id)] == [[2 << 20]] * 3


def test_sync_batch_norm_statistics_with_unequal_counts() -> None:
    # batch_norm_gather_stats_with_counts (CUDA only): the ranks' means and invstds merged
    # equal the statistics of all their data at once; running stats take the unbiased var
    torch.manual_seed(0)
    parts = [torch.randn(n, 4, dtype=torch.float64) * 3 + 1 for n in (5, 2, 9)]
    eps = 1e-5
    whole = torch.cat(parts)
    with simulate("H100"):
        means = torch.stack([p.mean(0) for p in parts]).cuda()
        invstds = torch.stack([1 / (p.var(0, unbiased=False) + eps).sqrt() for p in parts]).cuda()
        running_mean = torch.zeros(4, dtype=torch.float64, device="cuda")
        running_var = torch.ones(4, dtype=torch.float64, device="cuda")
        counts = torch.tensor([5.0, 2.0, 9.0], dtype=torch.float64, device="cuda")
        mean, invstd = torch.batch_norm_gather_stats_with_counts(
            whole.cuda(), means, invstds, running_mean, running_var, 0.1, eps, counts
        )
        assert mean.device == torch.device("cuda", 0)
        torch.testing.assert_close(mean.cpu(), whole.mean(0))
        torch.testing.assert_close(invstd.cpu(), 1 / (whole.var(0, unbiased=False) + eps).sqrt())
        torch.testing.assert_close(running_mean.cpu(), 0.1 * whole.mean(0))
        torch.testing.assert_close(running_var.cpu(), 0.9 + 0.1 * whole.var(0))
