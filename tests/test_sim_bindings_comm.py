"""``torch.cuda.comm`` on simulated GPUs: torch's Python over the emulated ``torch._C._broadcast*``,
``_scatter*`` and ``_gather*`` bindings, whose checks and results follow
torch/csrc/cuda/comm.cpp."""

from __future__ import annotations

import pytest
import torch
from torch.cuda import comm

from torchplace.sim import simulate


def test_scatter_follows_comm_cpp() -> None:
    with simulate("H100", gpus=3):
        src = torch.arange(30.0, device="cuda:1").reshape(2, 15)
        # chunk_sizes split the source along dim; a chunk bound for the source's own device
        # is a view of it (comm.cpp scatter copies only to other devices)
        parts = comm.scatter(src, (2, 1, 0), chunk_sizes=(3, 5, 7), dim=-1)
        assert [p.get_device() for p in parts] == [2, 1, 0]
        assert [p.shape[1] for p in parts] == [3, 5, 7]
        assert parts[1].data_ptr() == src[:, 3:].data_ptr()
        assert torch.equal(torch.cat([p.cpu() for p in parts], 1), src.cpu())
        # comm.cpp's own checks and messages
        with pytest.raises(RuntimeError, match=r"len\(devices\) = 2 and len\(chunk_sizes\) = 3"):
            comm.scatter(src, (0, 2), chunk_sizes=(3, 5, 7), dim=1)
        with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum"):
            comm.scatter(src, (0, 2), chunk_sizes=(3, 5), dim=1)
        with pytest.raises(RuntimeError, match="Expected at least one device to scatter to"):
            comm.scatter(src.cpu(), [])
        with pytest.raises(IndexError, match="Dimension out of range"):
            comm.scatter(src, (0, 2), dim=2)
        # a stream given for a chunk must be on that chunk's device
        side = torch.cuda.Stream(0)
        with pytest.raises(RuntimeError, match=r"stream at index 1 \(was 0\) .*\(expected 2\)"):
            comm.scatter(src, (0, 2), dim=1, streams=[side, side])
        # out=: the sizes come from the outputs
        out = [torch.empty(2, 15, device="cuda:2"), torch.empty(0, 15, device="cuda:0")]
        assert comm.scatter(src, out=out, dim=0)[0] is out[0]
        with pytest.raises(RuntimeError, match="Output tensor at index 1 has incorrect shape"):
            comm.scatter(src, out=[out[0], torch.empty(2, 3, device="cuda:0")], dim=0)
        with pytest.raises(RuntimeError, match="Expected 2, but got total size 4"):
            comm.scatter(src, out=[out[0], out[0]], dim=0)


def test_gather_follows_comm_cpp() -> None:
    with simulate("H100", gpus=2):
        a = torch.ones(3, 2, 4, 4, device="cuda:0").to(memory_format=torch.channels_last)
        b = torch.zeros(1, 2, 4, 4, device="cuda:1").to(memory_format=torch.channels_last)
        with torch.cuda.device(1):  # no destination: the current device
            whole = comm.gather([a, b])
        assert whole.get_device() == 1 and whole.shape == (4, 2, 4, 4)
        # the inputs' common memory format is kept; a mix gives a contiguous result
        assert whole.is_contiguous(memory_format=torch.channels_last)
        assert comm.gather([a, b.contiguous()], destination="cpu").is_contiguous()
        assert whole.sum().item() == a.numel()
        with pytest.raises(RuntimeError, match="Expected at least one tensor to gather from"):
            comm.gather([], destination=0)
        with pytest.raises(RuntimeError, match="but tensor at index 1 has device cpu"):
            comm.gather([a, b.cpu()])
        with pytest.raises(RuntimeError, match="index 1has 3 dimensions, \\(expected 4\\)"):
            comm.gather([a, b[0]])
        with pytest.raises(RuntimeError, match=r"index 1 has invalid shape \[1, 2, 4, 3\]"):
            comm.gather([a, b[..., :3]])
        out = torch.empty(4, 2, 4, 4)
        assert comm.gather([a, b], out=out) is out and out.sum().item() == a.numel()
        with pytest.raises(RuntimeError, match=r"to have shape \[4, 2, 4, 4\], but got \[4\]"):
            comm.gather([a, b], out=torch.empty(4))


def test_broadcast_follows_comm_cpp() -> None:
    with simulate("H100", gpus=3):
        src = torch.arange(6, device="cuda:2").reshape(2, 3).t()  # not contiguous
        copies = comm.broadcast(src, (0, 2, 1))
        assert copies[1] is src  # the source itself on its own device
        assert [c.get_device() for c in copies] == [0, 2, 1]
        assert all(torch.equal(c.cpu(), src.cpu()) for c in copies)
        with pytest.raises(RuntimeError, match="Expected non-negative device index, but got -1"):
            torch._C._broadcast(src, [0, -1])
        with pytest.raises(RuntimeError, match="but output tensor at index 0 has device 'cpu'"):
            comm.broadcast(src, out=[torch.empty(3, 2)])
        with pytest.raises(RuntimeError, match=r"source tensor \[3, 2\], .* index 1 has shape"):
            comm.broadcast(src, out=[torch.empty(3, 2, device=0), torch.empty(6, device=1)])


def test_broadcast_coalesced_gives_views_with_their_own_versions() -> None:
    with simulate("H100", gpus=2):
        tensors = [
            torch.full((3,), 1.0, device="cuda:1", dtype=torch.float16),
            torch.arange(4, device="cuda:1"),
            torch.full((2, 2), 2.0, device="cuda:1", dtype=torch.float16),
        ]
        mine, theirs = comm.broadcast_coalesced(tensors, (1, 0), buffer_size=1 << 20)
        assert all(m is t for m, t in zip(mine, tensors, strict=True))
        # reordered as the inputs though coalesced by dtype (torch._utils._take_tensors)
        assert [(t.dtype, t.shape, t.get_device()) for t in theirs] == [
            (t.dtype, t.shape, 0) for t in tensors
        ]
        assert all(torch.equal(t.cpu(), s.cpu()) for t, s in zip(theirs, tensors, strict=True))
        # the two float16 tensors are views of one buffer, each with its own version counter
        assert theirs[0].untyped_storage().data_ptr() == theirs[2].untyped_storage().data_ptr()
        theirs[0].add_(1)
        assert (theirs[0]._version, theirs[2]._version) == (1, 0)
        with pytest.raises(RuntimeError, match=r"All tensors must be on devices\[0\]: 0"):
            comm.broadcast_coalesced(tensors, (0, 1))


def test_data_parallel_runs_on_simulated_gpus() -> None:
    # nn.DataParallel (torch/nn/parallel/): replicate broadcasts the parameters coalesced,
    # scatter splits the batch, gather joins the outputs, backward reduce_add_coalesced
    with simulate("H100", gpus=2):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3).cuda()
        x = torch.randn(6, 4, device="cuda")
        expected = model(x)
        out = torch.nn.DataParallel(model)(x)
        assert out.get_device() == 0 and torch.allclose(out.cpu(), expected.cpu())
        out.sum().backward()
        assert model.weight.grad is not None and model.weight.grad.get_device() == 0
        assert torch.allclose(model.weight.grad.cpu(), x.sum(0).expand(3, 4).cpu())
