"""Devices mixed in operators without a CUDA kernel of their own, and in kernels whose callers
move an argument first: the simulation follows what ATen's composite code does.

- An operator whose only kernel is ``CompositeExplicitAutograd[NonFunctional]`` runs that
  kernel on a GPU too; its inner operators check devices and put the result where they make
  it (``slice_scatter``: ``clone(self)`` then ``copy_(src)``, aten/src/ATen/native/
  TensorShape.cpp).
- A convolution backend whose kernel exists only for the CPU (``slow_conv3d_forward``),
  reached through a CUDA weight, meets the dispatcher's "Could not run ... 'CUDA' backend".
- ``ctc_loss`` moves the targets to the log-probabilities' device and reads the lengths on
  the host (aten/src/ATen/native/LossCTC.cpp).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from torchplace.sim import simulate


def test_a_scatter_into_a_host_tensor_lands_on_the_host() -> None:
    with simulate("H100", gpus=2):
        host = torch.zeros(4, 4)
        row = torch.ones(4, device="cuda")
        for out, ones in (
            (torch.select_scatter(host, row, 0, 1), 4),
            (torch.slice_scatter(host, row.expand(2, 4), 0, 0, 2), 8),
            (torch.diagonal_scatter(host, row), 4),
            (torch.as_strided_scatter(host, row, (4,), (1,)), 4),
        ):
            assert out.device == torch.device("cpu")
            assert out.sum().item() == ones  # the GPU values were copied in
        # a GPU self and a host src: on self's GPU (copy_ takes any device)
        gpu = torch.zeros(4, 4, device="cuda:1")
        assert torch.select_scatter(gpu, torch.ones(4), 0, 1).device == torch.device("cuda:1")


def test_a_composites_inner_check_still_refuses() -> None:
    # logical_and: the result is made with self's options, then TensorIterator checks it
    # (a 0-dim host input is a scalar to a CUDA kernel; a host output is not)
    with simulate("H100"):
        gpu = torch.ones(3, device="cuda", dtype=torch.bool)
        assert torch.logical_and(gpu, torch.tensor(True)).device.type == "cuda"
        with pytest.raises(RuntimeError, match="same device"):
            torch.logical_and(torch.ones(3, dtype=torch.bool), gpu)
        # block_diag checks devices in its own code (which reads the backing device)
        with pytest.raises(RuntimeError, match="same device"):
            torch.block_diag(torch.ones(2, 2), torch.ones(2, 2, device="cuda"))


def test_a_cpu_only_convolution_kernel_under_a_cuda_weight_is_not_found() -> None:
    with simulate("H100"):
        weight = torch.randn(3, 2, 2, 2, 2, device="cuda")
        with pytest.raises(NotImplementedError, match="Could not run 'aten::slow_conv3d_forward'"):
            F.conv3d(torch.randn(1, 2, 4, 4, 4), weight)
        # the 2-d slow kernel has a CUDA kernel, which checks devices in its wrapper
        with pytest.raises(RuntimeError, match="same device"):
            F.conv2d(torch.randn(1, 2, 4, 4), torch.randn(3, 2, 2, 2, device="cuda"))


def test_ctc_loss_moves_targets_and_reads_lengths_on_the_host() -> None:
    log_probs = torch.randn(6, 2, 5).log_softmax(-1)
    targets = torch.randint(1, 5, (2, 3))
    lengths = torch.full((2,), 6), torch.full((2,), 3)
    with simulate("H100"):
        gpu = log_probs.cuda().requires_grad_()
        for tgt, il, tl in (
            (targets, *lengths),  # host targets and lengths
            (targets.cuda(), lengths[0].cuda(), lengths[1]),
            (targets, [6, 6], [3, 3]),
        ):
            loss = F.ctc_loss(gpu, tgt, il, tl)
            assert loss.device.type == "cuda"
            loss.backward()
            assert gpu.grad is not None and gpu.grad.device.type == "cuda"
        # host log-probabilities with GPU targets: the targets come to the host
        assert F.ctc_loss(log_probs, targets.cuda(), *lengths).device.type == "cpu"
        want = F.ctc_loss(log_probs, targets, *lengths, reduction="none")
        got = F.ctc_loss(gpu, targets.cuda(), *lengths, reduction="none")
        assert torch.allclose(got.cpu(), want)
        with pytest.raises(RuntimeError, match="input_lengths must be integral"):
            F.ctc_loss(gpu, targets, lengths[0].float(), lengths[1])


def test_unsafe_index_put_takes_index_puts_device_rule() -> None:
    # host indices are moved to self's device; a host value beside a GPU self with
    # accumulate is refused by index_put's own check
    with simulate("H100"):
        gpu = torch.zeros(5, device="cuda")
        index = [torch.tensor([0, 2])]
        out = torch.ops.aten._unsafe_index_put(gpu, index, torch.ones(2, device="cuda"), True)
        assert out.device.type == "cuda" and out.sum().item() == 2.0
        with pytest.raises(RuntimeError, match="expected device cuda:0 but got device cpu"):
            torch.ops.aten._unsafe_index_put(gpu, index, torch.ones(2), True)
