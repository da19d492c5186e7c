"""Tests of the CUDA caching allocator model (torchplace.sim.allocator), pure Python."""

from __future__ import annotations

import doctest
import pickle
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchplace.sim import allocator
from torchplace.sim.allocator import (
    AllocatorOOM,
    CachingAllocatorModel,
    round_size,
    segment_size,
)

KiB = 1024
MiB = 1024**2
GiB = 1024**3
_POOLS = ("all", "small_pool", "large_pool")


def _blocks(model: CachingAllocatorModel) -> list[list[tuple[int, str]]]:
    """(size, state) of every block, segment by segment."""
    return [[(b["size"], b["state"]) for b in seg["blocks"]] for seg in model.snapshot()]


def _check_invariants(model: CachingAllocatorModel, capacity: int, outside: int) -> None:
    snap = model.snapshot()
    stats = model.stats()
    live = [b for seg in snap for b in seg["blocks"] if b["state"] == "active_allocated"]
    assert model.reserved_bytes == sum(seg["total_size"] for seg in snap)
    assert model.reserved_bytes == stats["reserved_bytes.all.current"]
    assert model.reserved_bytes <= capacity - outside
    assert model.allocated_bytes == sum(b["size"] for b in live)
    assert stats["allocation.all.current"] == stats["active.all.current"] == len(live)
    assert stats["requested_bytes.all.current"] == sum(b["requested_size"] for b in live)
    assert model.num_segments == len(snap)
    split_free = [
        b
        for seg in snap
        if len(seg["blocks"]) > 1
        for b in seg["blocks"]
        if b["state"] == "inactive"
    ]
    assert stats["inactive_split.all.current"] == len(split_free)
    assert stats["inactive_split_bytes.all.current"] == sum(b["size"] for b in split_free)
    for pool in ("small", "large"):
        pool_segments = [seg for seg in snap if seg["segment_type"] == pool]
        assert stats[f"segment.{pool}_pool.current"] == len(pool_segments)
        assert stats[f"reserved_bytes.{pool}_pool.current"] == sum(
            seg["total_size"] for seg in pool_segments
        )
    for seg in snap:
        assert seg["total_size"] % (2 * MiB) == 0
        if seg["segment_type"] == "small":
            assert seg["total_size"] == 2 * MiB
        address = seg["address"]
        previous_state = None
        for block in seg["blocks"]:
            assert block["address"] == address, "blocks must tile their segment"
            assert block["size"] % 512 == 0
            address += block["size"]
            # coalescing: two free neighbours never stay apart
            assert not (block["state"] == previous_state == "inactive")
            previous_state = block["state"]
        assert address == seg["address"] + seg["total_size"]
    for key, value in stats.items():
        if key.endswith(".peak"):
            assert value >= stats[key[: -len("peak")] + "current"]


# -- rounding and segment sizes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("nbytes", "expected"), [(0, 512), (1, 512), (511, 512), (512, 512), (513, 1024)]
)
def test_round_size(nbytes: int, expected: int) -> None:
    assert round_size(nbytes) == expected


@pytest.mark.parametrize(
    ("rounded", "expected"),
    [
        (512, 2 * MiB),  # small pool: 2 MiB segments (kSmallBuffer)
        (1 * MiB, 2 * MiB),  # kSmallSize is still small
        (1 * MiB + 512, 20 * MiB),  # 1-10 MiB share 20 MiB segments (kLargeBuffer)
        (5 * MiB, 20 * MiB),
        (10 * MiB - 512, 20 * MiB),
        (10 * MiB, 10 * MiB),  # from kMinLargeAlloc on: rounded up to 2 MiB
        (11 * MiB, 12 * MiB),
        (12 * MiB + 1, 14 * MiB),
    ],
)
def test_segment_size(rounded: int, expected: int) -> None:
    assert segment_size(rounded) == expected


@pytest.mark.parametrize("bad", [-1, 1.5, "4", True, None])
def test_sizes_must_be_non_negative_integers(bad: Any) -> None:
    with pytest.raises(ValueError, match="must be a non-negative integer"):
        round_size(bad)
    with pytest.raises(ValueError, match="must be a non-negative integer"):
        segment_size(bad)
    with pytest.raises(ValueError, match="nbytes must be a non-negative integer"):
        CachingAllocatorModel(GiB).malloc(bad)


# -- numbers known from the real allocator -----------------------------------------------------


def test_single_small_tensor_matches_real_cuda() -> None:
    # Real CUDA: torch.zeros(1, device="cuda") (4 bytes) gives memory_allocated() == 512
    # and memory_reserved() == 2097152: one 512-byte block in a 2 MiB small segment.
    model = CachingAllocatorModel(80 * GiB)
    model.malloc(4)
    assert model.allocated_bytes == 512
    assert model.reserved_bytes == 2097152
    assert model.snapshot()[0]["segment_type"] == "small"


def test_four_mib_tensor_matches_real_cuda() -> None:
    # Real CUDA: torch.zeros(1024, 1024, device="cuda") (float32, 4 MiB) gives
    # memory_allocated() == 4194304 and memory_reserved() == 20971520.
    model = CachingAllocatorModel(80 * GiB)
    model.malloc(1024 * 1024 * 4)
    assert model.allocated_bytes == 4194304
    assert model.reserved_bytes == 20971520
    assert _blocks(model) == [[(4 * MiB, "active_allocated"), (16 * MiB, "inactive")]]


def test_zero_bytes_never_reach_the_allocator() -> None:
    # CUDACachingAllocator::allocate(0) returns a null pointer without a block.
    model = CachingAllocatorModel(GiB)
    assert model.malloc(0) == 0
    model.free(0)  # freeing the null pointer is a no-op
    assert model.reserved_bytes == 0
    assert model.stats()["allocation.all.allocated"] == 0


# -- splitting, reuse, coalescing, best fit ----------------------------------------------------


def test_two_small_allocations_share_one_segment() -> None:
    model = CachingAllocatorModel(GiB)
    a = model.malloc(1 * KiB)
    b = model.malloc(1 * KiB)
    assert model.num_segments == 1
    assert model.reserved_bytes == 2 * MiB
    assert b == a + 1 * KiB  # split off right after the first block
    assert model.allocated_bytes == 2 * KiB


def test_freeing_and_reallocating_reuses_the_cached_block() -> None:
    model = CachingAllocatorModel(GiB)
    a = model.malloc(1 * KiB)
    model.free(a)
    assert model.allocated_bytes == 0
    assert model.reserved_bytes == 2 * MiB  # cached, not returned to CUDA
    assert model.malloc(1 * KiB) == a
    assert model.reserved_bytes == 2 * MiB
    assert model.stats()["num_device_alloc"] == 1


def test_freed_neighbours_coalesce() -> None:
    model = CachingAllocatorModel(GiB)
    a, b, c = (model.malloc(1 * KiB) for _ in range(3))
    model.free(a)
    model.free(c)  # merges with the free tail of the segment
    assert _blocks(model) == [
        [(1 * KiB, "inactive"), (1 * KiB, "active_allocated"), (2 * MiB - 2 * KiB, "inactive")]
    ]
    model.free(b)  # merges with both neighbours: the segment is whole again
    assert _blocks(model) == [[(2 * MiB, "inactive")]]
    assert model.stats()["inactive_split.all.current"] == 0
    model.empty_cache()  # a whole free segment can be released
    assert model.reserved_bytes == 0


def test_best_fit_takes_the_smallest_block_that_fits() -> None:
    model = CachingAllocatorModel(GiB)
    four = model.malloc(4 * KiB)
    model.malloc(512)  # keeps the free blocks apart
    two = model.malloc(2 * KiB)
    model.malloc(512)
    model.free(four)
    model.free(two)
    assert model.malloc(2 * KiB) == two  # exact fit beats the larger 4 KiB block
    assert model.malloc(3 * KiB) == four  # 4 KiB beats the large free tail, and splits
    assert model.malloc(1 * KiB) == four + 3 * KiB
    assert model.num_segments == 1


def test_best_fit_breaks_ties_by_lowest_address() -> None:
    model = CachingAllocatorModel(GiB)
    first = model.malloc(2 * KiB)
    model.malloc(512)
    second = model.malloc(2 * KiB)
    model.malloc(512)
    model.free(second)
    model.free(first)
    assert model.malloc(2 * KiB) == first


def test_small_pool_splits_when_512_bytes_remain() -> None:
    model = CachingAllocatorModel(GiB)
    model.malloc(1 * MiB)
    model.malloc(1 * MiB - 512)  # leaves exactly 512 bytes: still split
    assert _blocks(model)[0][-1] == (512, "inactive")
    model.malloc(1)
    assert model.num_segments == 1
    assert model.allocated_bytes == 2 * MiB


def test_large_pool_splits_only_when_more_than_one_mib_remains() -> None:
    model = CachingAllocatorModel(GiB)
    model.malloc(5 * MiB)  # 20 MiB segment, 15 MiB remain: split
    model.malloc(19 * MiB)  # 20 MiB segment, 1 MiB remains: not split
    model.malloc(19 * MiB + 512)  # 20 MiB segment, under 1 MiB remains: not split
    assert _blocks(model) == [
        [(5 * MiB, "active_allocated"), (15 * MiB, "inactive")],
        [(20 * MiB, "active_allocated")],
        [(20 * MiB, "active_allocated")],
    ]
    assert model.allocated_bytes == 45 * MiB  # the unsplit blocks count whole


def test_a_cached_large_block_serves_a_smaller_request() -> None:
    model = CachingAllocatorModel(GiB)
    model.free(model.malloc(20 * MiB))
    model.malloc(12 * MiB)
    assert model.reserved_bytes == 20 * MiB
    assert _blocks(model) == [[(12 * MiB, "active_allocated"), (8 * MiB, "inactive")]]


def test_small_and_large_pools_are_separate() -> None:
    model = CachingAllocatorModel(GiB)
    model.free(model.malloc(20 * MiB))
    model.malloc(1 * KiB)  # the cached large block is not used for a small request
    assert model.reserved_bytes == 22 * MiB
    assert [seg["segment_type"] for seg in model.snapshot()] == ["large", "small"]


def test_cached_blocks_are_reused_only_on_their_stream() -> None:
    model = CachingAllocatorModel(GiB)
    a = model.malloc(1 * KiB, stream=0)
    model.free(a)
    b = model.malloc(1 * KiB, stream=7)
    assert b != a
    assert model.num_segments == 2
    assert [seg["stream"] for seg in model.snapshot()] == [0, 7]
    assert model.malloc(1 * KiB, stream=0) == a


def test_a_block_used_on_another_stream_waits_for_its_release() -> None:
    """c10's free of a block with stream uses (record_stream): the allocation stats drop at
    once, the block is "active_pending_free" and not reused, and neither of its neighbours
    merges with it, until its release (process_events) or empty_cache."""
    model = CachingAllocatorModel(GiB)
    a, b = model.malloc(1 * KiB), model.malloc(1 * KiB)
    model.free(a, pending=True)
    assert model.allocated_bytes == 1 * KiB
    assert model.stats()["allocation.all.current"] == 1
    assert model.pending == {a}
    model.free(b)  # does not merge with the pending block
    assert _blocks(model) == [[(1 * KiB, "active_pending_free"), (2 * MiB - 1 * KiB, "inactive")]]
    assert model.malloc(1 * KiB) != a
    model.release(a)
    assert model.malloc(1 * KiB) == a
    with pytest.raises(ValueError, match="not a pending block"):
        model.release(a)
    c = model.malloc(4 * KiB)
    model.free(c, pending=True)
    model.empty_cache()  # synchronize_and_free_events: released first
    assert model.pending == frozenset()


# -- out of memory and the free-cache-and-retry path -------------------------------------------


def test_oom_when_the_device_is_full() -> None:
    model = CachingAllocatorModel(100 * MiB, reserved_outside=10 * MiB)
    model.malloc(90 * MiB)
    with pytest.raises(AllocatorOOM) as info:
        model.malloc(1 * MiB)
    e = info.value
    assert (e.requested, e.alloc_size) == (1 * MiB, 2 * MiB)
    assert (e.free_device, e.allocated, e.reserved, e.capacity) == (
        0,
        90 * MiB,
        90 * MiB,
        100 * MiB,
    )
    assert model.num_ooms == 1
    assert model.num_alloc_retries == 1  # the cache was emptied and cudaMalloc retried
    assert model.allocated_bytes == 90 * MiB  # nothing else changed
    assert isinstance(e, RuntimeError)
    assert e.hint


def test_oom_leaves_no_stale_segment_and_allocation_continues() -> None:
    model = CachingAllocatorModel(64 * MiB)
    with pytest.raises(AllocatorOOM):
        model.malloc(65 * MiB)
    assert model.reserved_bytes == 0
    model.malloc(64 * MiB)  # exactly what the device has
    assert model.device_free_bytes == 0


def test_retry_after_releasing_cached_segments_succeeds() -> None:
    # Without the release the 80 MiB cudaMalloc fails: 60 MiB sit cached, 40 MiB are
    # free. The real allocator frees the cache and retries, and so does the model.
    model = CachingAllocatorModel(100 * MiB)
    model.free(model.malloc(60 * MiB))
    assert model.reserved_bytes == 60 * MiB
    model.malloc(80 * MiB)
    assert model.reserved_bytes == 80 * MiB
    stats = model.stats()
    assert stats["num_alloc_retries"] == 1
    assert stats["num_ooms"] == 0
    assert stats["num_sync_all_streams"] == 1
    assert stats["num_device_free"] == 1


def test_retry_cannot_release_a_partly_used_segment() -> None:
    model = CachingAllocatorModel(100 * MiB)
    model.malloc(5 * MiB)  # lives in a 20 MiB segment with 15 MiB cached beside it
    model.free(model.malloc(40 * MiB))  # a whole cached segment
    model.malloc(70 * MiB)  # needs the 40 MiB back, but not the split segment
    assert model.reserved_bytes == 90 * MiB
    with pytest.raises(AllocatorOOM) as info:
        model.malloc(16 * MiB)  # 10 MiB free; the 15 MiB split remainder cannot help
    assert info.value.reserved - info.value.allocated == 15 * MiB


# -- max_split_size ----------------------------------------------------------------------------


def test_oversize_blocks_do_not_serve_smaller_requests() -> None:
    model = CachingAllocatorModel(GiB, max_split_size=40 * MiB)
    model.free(model.malloc(50 * MiB))
    model.malloc(30 * MiB)  # below max_split_size: the 50 MiB block is not used
    assert model.reserved_bytes == 80 * MiB


def test_oversize_blocks_serve_requests_within_the_rounding_limit_whole() -> None:
    model = CachingAllocatorModel(GiB, max_split_size=40 * MiB)
    model.free(model.malloc(50 * MiB))
    model.malloc(45 * MiB)  # 50 < 45 + 20 MiB: reused, and not split
    assert model.reserved_bytes == 50 * MiB
    assert model.allocated_bytes == 50 * MiB
    model.free(model.malloc(80 * MiB))
    model.malloc(60 * MiB - 512)  # 80 MiB >= 60 MiB + 20 MiB: not reused
    assert model.reserved_bytes == 190 * MiB
    stats = model.stats()
    assert stats["max_split_size"] == 40 * MiB
    assert stats["oversize_allocations.current"] == 2
    assert stats["oversize_segments.current"] == 3


def test_oversize_blocks_are_released_before_emptying_the_cache() -> None:
    # release_available_cached_blocks frees oversize blocks, largest first, until the
    # request fits; no full cache flush (and so no counted retry) is needed.
    model = CachingAllocatorModel(100 * MiB, max_split_size=40 * MiB)
    a, b = model.malloc(45 * MiB), model.malloc(50 * MiB)
    model.free(a)
    model.free(b)
    model.malloc(70 * MiB)
    assert model.reserved_bytes == 70 * MiB
    stats = model.stats()
    assert (stats["num_alloc_retries"], stats["num_sync_all_streams"]) == (0, 0)
    assert stats["num_device_free"] == 2


def test_one_large_enough_oversize_block_is_released() -> None:
    model = CachingAllocatorModel(100 * MiB, max_split_size=40 * MiB)
    model.free(model.malloc(80 * MiB))
    model.malloc(50 * MiB)  # 80 >= 50 + 20 MiB: not reused, but freed to make room
    assert model.reserved_bytes == 50 * MiB
    assert model.num_alloc_retries == 0


def test_without_max_split_size_the_same_workload_needs_a_retry() -> None:
    model = CachingAllocatorModel(100 * MiB)
    a, b = model.malloc(45 * MiB), model.malloc(50 * MiB)
    model.free(a)
    model.free(b)
    model.malloc(70 * MiB)
    assert model.num_alloc_retries == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_split_size": 10 * MiB}, "max_split_size must be at least 20 MiB"),
        ({"max_non_split_rounding": MiB}, "max_non_split_rounding must be at least 20 MiB"),
        ({"reserved_outside": 2 * GiB}, "reserved_outside"),
        ({"reserved_outside": -1}, "reserved_outside must be a non-negative integer"),
    ],
)
def test_bad_configuration_is_rejected(kwargs: dict[str, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CachingAllocatorModel(GiB, **kwargs)


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity_bytes must be the device's total memory"):
        CachingAllocatorModel(0)


# -- empty_cache, peaks, stats, snapshot -------------------------------------------------------


def test_empty_cache_releases_only_fully_free_segments() -> None:
    model = CachingAllocatorModel(GiB)
    kept = model.malloc(1 * KiB)
    model.malloc(1 * KiB)
    large, medium = model.malloc(30 * MiB), model.malloc(5 * MiB)
    for handle in (large, medium, kept):
        model.free(handle)
    assert model.reserved_bytes == 2 * MiB + 30 * MiB + 20 * MiB
    model.empty_cache()
    assert model.reserved_bytes == 2 * MiB  # the small segment still holds a live block
    assert model.stats()["num_device_free"] == 2


def test_peaks_survive_frees_until_reset() -> None:
    model = CachingAllocatorModel(GiB)
    a = model.malloc(30 * MiB)
    b = model.malloc(3 * MiB)
    model.free(a)
    model.free(b)
    model.empty_cache()
    assert (model.allocated_bytes, model.reserved_bytes) == (0, 0)
    assert model.peak_allocated_bytes == 33 * MiB
    assert model.peak_reserved_bytes == 50 * MiB
    model.malloc(1)
    model.reset_peak_stats()
    assert (model.peak_allocated_bytes, model.peak_reserved_bytes) == (512, 2 * MiB)


def test_stats_keys_are_those_of_torch_cuda_memory_stats() -> None:
    model = CachingAllocatorModel(GiB)
    model.malloc(5 * MiB)
    stats = model.stats()
    expected = {
        f"{name}.{pool}.{metric}"
        for name in (
            "allocation",
            "segment",
            "active",
            "inactive_split",
            "allocated_bytes",
            "reserved_bytes",
            "active_bytes",
            "inactive_split_bytes",
            "requested_bytes",
        )
        for pool in ("all", "small_pool", "large_pool")
        for metric in ("current", "peak", "allocated", "freed")
    }
    expected |= {
        f"{name}.{metric}"
        for name in ("oversize_allocations", "oversize_segments")
        for metric in ("current", "peak", "allocated", "freed")
    }
    expected |= {
        "num_alloc_retries",
        "num_ooms",
        "num_sync_all_streams",
        "num_device_alloc",
        "num_device_free",
        "num_oom_rejections",
        "max_split_size",
    }
    assert set(stats) == expected
    assert list(stats) == sorted(stats)  # memory_stats() is sorted by key too
    assert stats["allocated_bytes.all.current"] == 5 * MiB
    assert stats["allocated_bytes.large_pool.current"] == 5 * MiB
    assert stats["allocated_bytes.small_pool.current"] == 0
    assert stats["reserved_bytes.all.peak"] == 20 * MiB
    assert stats["inactive_split.all.current"] == 1
    assert stats["inactive_split_bytes.all.current"] == 15 * MiB
    assert stats["max_split_size"] == -1  # SIZE_MAX read back as int64


def test_stats_accumulate_allocated_and_freed() -> None:
    model = CachingAllocatorModel(GiB)
    for _ in range(3):
        model.free(model.malloc(1000))
    stats = model.stats()
    assert stats["allocation.all.allocated"] == stats["allocation.all.freed"] == 3
    assert stats["allocated_bytes.small_pool.allocated"] == 3 * 1024
    assert stats["requested_bytes.all.freed"] == 3000
    assert stats["segment.all.allocated"] == 1


def test_snapshot_shape() -> None:
    model = CachingAllocatorModel(GiB, device_index=3)
    handle = model.malloc(1000, stream=0)
    (seg,) = model.snapshot()
    assert set(seg) == {
        "device",
        "address",
        "total_size",
        "allocated_size",
        "active_size",
        "requested_size",
        "stream",
        "segment_type",
        "segment_pool_id",
        "is_expandable",
        "frames",
        "blocks",
    }
    assert seg["device"] == 3
    assert (seg["address"], seg["total_size"], seg["segment_type"]) == (handle, 2 * MiB, "small")
    assert (seg["allocated_size"], seg["requested_size"]) == (1024, 1000)
    assert seg["blocks"][0] == {
        "address": handle,
        "size": 1024,
        "requested_size": 1000,
        "state": "active_allocated",
        "frames": [],
    }
    assert seg["blocks"][1]["state"] == "inactive"


def test_free_rejects_unknown_and_double_frees() -> None:
    model = CachingAllocatorModel(GiB)
    handle = model.malloc(1)
    for unknown in (handle + 512, 12345):  # a cached block's address; no block at all
        with pytest.raises(ValueError, match="not a live block of this allocator"):
            model.free(unknown)
    model.free(handle)
    with pytest.raises(ValueError, match="not a live block of this allocator"):
        model.free(handle)


# -- the out-of-memory message -----------------------------------------------------------------


def test_oom_message_has_cuda_shape() -> None:
    e = AllocatorOOM(
        requested=2 * GiB,
        alloc_size=2 * GiB,
        free_device=int(1.23 * GiB),
        allocated=int(70.12 * GiB),
        reserved=int(70.12 * GiB) + int(3.45 * GiB),
        capacity=int(79.11 * GiB),
    )
    assert e.message(0) == (
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has "
        "77.88 GiB memory in use. Of the allocated memory 70.12 GiB is allocated "
        "by PyTorch, and 3.45 GiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    assert str(e) == e.message(0)
    assert "GPU 5 has" in e.message(5)


def test_oom_message_reports_the_segment_size_and_device() -> None:
    # Like the real allocator, the message names the cudaMalloc size: a 5 MiB tensor
    # "Tried to allocate 20.00 MiB".
    model = CachingAllocatorModel(30 * MiB, reserved_outside=12 * MiB, device_index=1)
    model.malloc(512)
    with pytest.raises(AllocatorOOM) as info:
        model.malloc(5 * MiB)
    assert str(info.value).startswith(
        "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of "
        "30.00 MiB of which 16.00 MiB is free. Including non-PyTorch memory, this process has "
        "14.00 MiB memory in use. Of the allocated memory 512 bytes is "  # context + reserved
        "allocated by PyTorch, and 2.00 MiB is reserved by PyTorch but unallocated."
    )


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (0, "0 bytes"),
        (1024, "1024 bytes"),
        (1025, "1.00 KiB"),
        (MiB, "1024.00 KiB"),
        (MiB + 1, "1.00 MiB"),
        (GiB, "1024.00 MiB"),
        (int(1.5 * GiB), "1.50 GiB"),
    ],
)
def test_sizes_are_formatted_like_c10(nbytes: int, text: str) -> None:
    assert allocator._format_size(nbytes) == text


def test_oom_survives_pickling() -> None:
    model = CachingAllocatorModel(10 * MiB, device_index=2)
    with pytest.raises(AllocatorOOM) as info:
        model.malloc(11 * MiB)
    copy = pickle.loads(pickle.dumps(info.value))
    assert isinstance(copy, AllocatorOOM)
    assert str(copy) == str(info.value)
    assert (copy.alloc_size, copy.device_index) == (12 * MiB, 2)


# -- properties over random workloads, and the docstring examples ------------------------------

_SIZES = st.one_of(
    st.integers(0, 4 * KiB),
    st.integers(0, 2 * MiB),
    st.integers(MiB, 12 * MiB),
    st.integers(10 * MiB, 70 * MiB),
)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("malloc"), _SIZES, st.sampled_from([0, 0, 0, 1])),
        st.tuples(st.just("free"), st.integers(0, 1000), st.just(0)),
        st.tuples(st.just("empty"), st.just(0), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS, max_split=st.sampled_from([None, 20 * MiB, 40 * MiB]))
def test_invariants_hold_on_random_workloads(
    ops: list[tuple[str, int, int]], max_split: int | None
) -> None:
    capacity, outside = 256 * MiB, 16 * MiB
    model = CachingAllocatorModel(capacity, reserved_outside=outside, max_split_size=max_split)
    live: list[int] = []
    ooms = 0
    for op, value, stream in ops:
        if op == "malloc":
            try:
                handle = model.malloc(value, stream=stream)
            except AllocatorOOM as e:
                ooms += 1
                # only whole free segments are released before giving up
                assert e.free_device < e.alloc_size
                assert e.reserved == model.reserved_bytes
                continue
            if handle:
                assert handle not in live
                live.append(handle)
        elif op == "free" and live:
            model.free(live.pop(value % len(live)))
        elif op == "empty":
            model.empty_cache()
            assert all(len(seg["blocks"]) > 1 or seg["allocated_size"] for seg in model.snapshot())
        _check_invariants(model, capacity, outside)
    assert model.num_ooms == ooms
    for handle in live:
        model.free(handle)
    model.empty_cache()
    assert (model.allocated_bytes, model.reserved_bytes, model.num_segments) == (0, 0, 0)


def test_peaks_and_totals_follow_every_malloc_and_free() -> None:
    """c10 updates each stat at every malloc and free; the model logs the changes and applies
    them when the stats are read (and every few thousand rows): the peaks, totals increased
    and decreased must be those of the changes one by one, per pool, across a reset."""
    rng = random.Random(0)
    model = CachingAllocatorModel(8 * GiB)
    seen = {pool: {"current": 0, "peak": 0, "allocated": 0, "freed": 0} for pool in _POOLS}
    live: list[tuple[int, str]] = []

    def record(pool: str, before: int) -> None:
        change = model.allocated_bytes - before
        for stat in (seen["all"], seen[pool]):
            stat["current"] += change
            stat["peak"] = max(stat["peak"], stat["current"])
            stat["allocated" if change > 0 else "freed"] += abs(change)

    for event in range(20_000):  # more rows than the log keeps before applying them
        before = model.allocated_bytes
        if not live or rng.random() < 0.52:
            nbytes = rng.choice([rng.randrange(1, 64 * KiB), rng.randrange(MiB, 24 * MiB)])
            pool = "small_pool" if round_size(nbytes) <= MiB else "large_pool"
            live.append((model.malloc(nbytes), pool))
        else:
            handle, pool = live.pop(rng.randrange(len(live)))
            model.free(handle)
        record(pool, before)
        if event == 12_345:
            model.reset_peak_stats()
            for stat in seen.values():
                stat["peak"] = stat["current"]
    stats = model.stats()
    for pool, expected in seen.items():
        got = {key: stats[f"allocated_bytes.{pool}.{key}"] for key in expected}
        assert got == expected, pool
    assert model.peak_allocated_bytes == seen["all"]["peak"]


def test_docstring_examples_run() -> None:
    result = doctest.testmod(allocator)
    assert result.attempted > 0
    assert result.failed == 0
