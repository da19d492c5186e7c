"""A simulated GPU's random generator, with CUDA's state: a seed and a Philox offset.

CUDA's generator is counter-based (Philox4x32-10): what a kernel draws is a function of the
seed and the offset it starts at, and each random kernel moves the offset on, by a multiple
of 4 (aten/src/ATen/cuda/CUDAGeneratorImpl.cpp: ``get_state`` packs the seed (uint64) and
``philox_offset_per_thread`` (int64) into 16 bytes of a uint8 tensor; ``set_state`` takes
those 16, or the 8 of a seed alone; ``set_philox_offset_per_thread`` refuses an offset that
is not a multiple of 4; ``philox_engine_inputs`` rounds an increment up to 4). Code that
reads the state relies on that layout: DTensor's RNG tracker
(torch/distributed/tensor/_random.py, ``_PhiloxState``) moves the offset so that each shard
draws its own numbers, and checks that every rank holds rank 0's state.

The simulator draws on the CPU (a Mersenne Twister generator): before each random operation
that generator is seeded from (seed, offset), and afterwards the offset moves on by the
numbers drawn, rounded up to 4 — so restoring a state replays what followed it, as on CUDA.
CUDA's own increments also depend on the launch shape; offsets, like the values drawn, are
the simulator's, not a GPU's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["PhiloxState", "increment", "pack", "unpack"]

T = TypeVar("T")
_MASK = 2**64 - 1
_GOLDEN = 0x9E3779B97F4A7C15  # spreads consecutive offsets over the 64-bit seed space


def pack(seed: int, offset: int) -> torch.Tensor:
    """CUDAGeneratorImpl::get_state: 16 bytes, the seed then the offset (little-endian)."""
    data = seed.to_bytes(8, "little") + offset.to_bytes(8, "little", signed=True)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def unpack(state: Any) -> tuple[int, int]:
    """CUDAGeneratorImpl::set_state's reading of a state, with its checks and errors."""
    if not (
        isinstance(state, torch.Tensor)
        and state.layout == torch.strided
        and state.device.type == "cpu"
        and state.dtype == torch.uint8
    ):
        raise TypeError("RNG state must be a torch.ByteTensor")  # Generator.h check_rng_state
    if state.numel() not in (8, 16):
        raise RuntimeError("RNG state is wrong size")
    data = bytes(state.contiguous().tolist())
    seed = int.from_bytes(data[:8], "little")
    offset = int.from_bytes(data[8:], "little", signed=True) if len(data) == 16 else 0
    if offset % 4:
        raise RuntimeError("offset must be a multiple of 4")
    return seed, offset


def increment(out: Any) -> int:
    """How far a random operation moves the offset: the numbers it made, rounded up to 4."""
    if isinstance(out, torch.Tensor):
        numel = out.numel()
    elif isinstance(out, (tuple, list)):
        numel = sum(t.numel() for t in out if isinstance(t, torch.Tensor))
    else:
        numel = 1
    return max(4, (numel + 3) // 4 * 4)


class PhiloxState:
    """The (seed, offset) of one simulated CUDA generator, and its CPU draws."""

    def __init__(self, seed: int) -> None:
        self.seed, self.offset = seed & _MASK, 0

    def draw(self, cpu: torch.Generator, run: Callable[[], T]) -> T:
        """Run a random operation on ``cpu`` seeded from (seed, offset); move the offset on."""
        torch._C.Generator.manual_seed(cpu, (self.seed ^ (self.offset * _GOLDEN)) & _MASK)
        out = run()
        self.offset += increment(out)
        return out
