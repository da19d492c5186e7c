"""The GPU's fused attention kernels with real values (torchplace.sim.rules._kernels).

The flash and memory-efficient kernels exist only for CUDA; with real values the simulator
computes their outputs and gradients on the CPU. Checked against plain PyTorch on the CPU,
and, with dropout, against finite differences of the simulated forward itself.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from torchplace.sim import simulate


def _inputs(dtype: torch.dtype, bias: bool) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    shapes = [(2, 3, 20, 16)] * 3 + ([(1, 3, 20, 20)] if bias else [])
    return [torch.randn(s, generator=g, dtype=dtype, requires_grad=True) for s in shapes]


def _on_cpu(tensors: list[torch.Tensor], is_causal: bool) -> tuple[torch.Tensor, list[Any]]:
    q, k, v, *bias = (t.detach().double().requires_grad_() for t in tensors)
    out = F.scaled_dot_product_attention(q, k, v, bias[0] if bias else None, is_causal=is_causal)
    out.backward(torch.ones_like(out))
    return out, [t.grad for t in (q, k, v, *bias)]


def _simulated(
    gpu: str, tensors: list[torch.Tensor], is_causal: bool, dropout_p: float = 0.0
) -> tuple[torch.Tensor, list[Any], list[str]]:
    with simulate(gpu) as report:
        on_gpu = [t.detach().cuda().requires_grad_() for t in tensors]
        q, k, v, *bias = on_gpu
        out = F.scaled_dot_product_attention(
            q, k, v, bias[0] if bias else None, dropout_p=dropout_p, is_causal=is_causal
        )
        out.backward(torch.ones_like(out))
        result = out.detach().cpu(), [t.grad.cpu() for t in on_gpu]
    return *result, [n["text"] for n in report.notes]


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
def test_memory_efficient_kernel_matches_pytorch_on_the_cpu(bias: bool) -> None:
    tensors = _inputs(torch.float32, bias)
    out, grads, notes = _simulated("A100 40GB", tensors, is_causal=not bias)
    assert any("memory-efficient kernel (as on the GPU)" in n for n in notes)
    want_out, want_grads = _on_cpu(tensors, is_causal=not bias)
    torch.testing.assert_close(out, want_out.float(), rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, want.float(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("gpu", "kernel"), [("A100 40GB", "flash"), ("H100", "cuDNN")])
def test_flash_and_cudnn_kernels_match_pytorch_on_the_cpu(gpu: str, kernel: str) -> None:
    # the H100 runs cuDNN's kernel first with the CUDA 13 build's cuDNN 9.24 (sdp_utils.cpp
    # check_prefer_cudnn_attention); the A100 flash
    tensors = _inputs(torch.bfloat16, bias=False)
    out, grads, notes = _simulated(gpu, tensors, is_causal=True)
    assert any(f"{kernel} kernel (as on the GPU)" in n for n in notes)
    want_out, want_grads = _on_cpu(tensors, is_causal=True)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), want_out.float(), rtol=2e-2, atol=2e-2)
    for got, want in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got.float(), want.float(), rtol=5e-2, atol=5e-2)


def _with_dropout(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> Any:
    torch.cuda.manual_seed(7)  # the dropout mask's seed comes from the GPU's generator
    q = query.detach().cuda().requires_grad_()
    out = F.scaled_dot_product_attention(q, key.cuda(), value.cuda(), dropout_p=0.3)
    return q, out


@pytest.mark.parametrize(("gpu", "dtype"), [("A100 40GB", torch.float32), ("H100", torch.bfloat16)])
def test_dropout_masks_repeat_with_the_seed(gpu: str, dtype: torch.dtype) -> None:
    q, k, v = (t.detach() for t in _inputs(dtype, bias=False))
    with simulate(gpu):
        _, out = _with_dropout(q, k, v)
        _, again = _with_dropout(q, k, v)
        torch.cuda.manual_seed(8)
        other = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), dropout_p=0.3)
        assert torch.equal(out.cpu(), again.cpu())
        assert not torch.equal(out.cpu(), other.cpu())


def test_dropout_gradients_agree_with_finite_differences() -> None:
    """Backward draws the forward's mask again (from the seed the kernel returned)."""
    q, k, v = (t.detach() for t in _inputs(torch.float32, bias=False))
    direction = torch.randn(q.shape, generator=torch.Generator().manual_seed(1))
    eps = 1e-2
    with simulate("A100 40GB"):
        leaf, out = _with_dropout(q, k, v)
        out.sum().backward()
        analytic = float((leaf.grad.cpu() * direction).sum())
        plus = float(_with_dropout(q + eps * direction, k, v)[1].sum())
        minus = float(_with_dropout(q - eps * direction, k, v)[1].sum())
    assert analytic == pytest.approx((plus - minus) / (2 * eps), rel=2e-2)


def test_kernel_layouts_follow_each_calls_shapes_and_strides() -> None:
    # the meta outputs are remembered per signature: a repeated call, then other shapes
    # and strides, each gets the layout its own meta function gives (and the same values)
    for shape, transposed in [((2, 3, 20, 16), False)] * 2 + [((1, 2, 9, 8), True)]:
        g = torch.Generator().manual_seed(1)
        q, k, v = (torch.randn(shape, generator=g) for _ in range(3))
        if transposed:  # (batch, seq, heads, dim) storage, as MultiheadAttention makes
            q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with simulate("A100 40GB"):
            got = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), is_causal=True)
            got = got.detach()
        meta = torch.ops.aten._scaled_dot_product_efficient_attention(
            *(t.to("meta") for t in (q, k, v)), None, False, 0.0, True
        )[0]  # the A100's kernel for fp32: its output layout
        assert (got.shape, got.stride()) == (want.shape, meta.stride())
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
