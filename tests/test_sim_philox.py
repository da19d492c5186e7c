"""A simulated CUDA generator keeps CUDA's state: the seed and the Philox offset (16 bytes).

aten/src/ATen/cuda/CUDAGeneratorImpl.cpp get_state / set_state; see src/torchplace/sim/emulation/_philox.py.
"""

from __future__ import annotations

import pytest
import torch

from torchplace.sim import simulate


def test_the_state_is_the_seed_and_an_offset_that_replays_what_followed() -> None:
    with simulate("H100"):
        torch.cuda.manual_seed(11)
        assert torch.cuda.get_rng_state().tolist() == [11, *[0] * 15]
        torch.rand(10, device="cuda")
        state = torch.cuda.get_rng_state()
        assert int(state[8:].view(torch.int64)) == 12  # 10 numbers, rounded up to 4
        a = torch.randn(3, device="cuda")
        b = torch.nn.functional.dropout(torch.ones(8, device="cuda"), 0.5)  # no generator arg
        torch.cuda.set_rng_state(state)
        assert torch.equal(torch.randn(3, device="cuda"), a)
        assert torch.equal(torch.nn.functional.dropout(torch.ones(8, device="cuda"), 0.5), b)
        torch.cuda.set_rng_state(state[:8].clone())  # a seed alone: offset 0
        assert torch.cuda.get_rng_state()[8:].tolist() == [0] * 8


def test_a_generator_of_the_scripts_own_and_a_host_generator() -> None:
    with simulate("H100"):
        g = torch.Generator(device="cuda").manual_seed(5)
        first = torch.rand(4, device="cuda", generator=g)
        assert g.get_offset() == 4 and g.get_state().shape == (16,)
        g.set_offset(0)
        assert torch.equal(torch.rand(4, device="cuda", generator=g), first)
        with pytest.raises(RuntimeError, match="offset must be a multiple of 4"):
            g.set_offset(6)
        host = torch.Generator().manual_seed(5)  # a CPU generator keeps the CPU's state
        assert host.get_state().numel() == 5056
        torch.rand(4, generator=host)


def test_a_state_cuda_would_refuse_is_refused() -> None:
    with simulate("H100"):
        torch.cuda.init()  # before it, set_rng_state is queued (torch.cuda._lazy_call)
        with pytest.raises(RuntimeError, match="RNG state is wrong size"):
            torch.cuda.set_rng_state(torch.zeros(5056, dtype=torch.uint8))  # a CPU state
        with pytest.raises(TypeError, match=r"RNG state must be a torch\.ByteTensor"):
            torch.cuda.set_rng_state(torch.zeros(16))
