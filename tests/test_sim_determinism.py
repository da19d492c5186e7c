"""CUDA's deterministic-algorithm alerts on simulated GPUs (torchplace.sim.rules._determinism).

The operators come from the installed torch's own list (tools/gen_deterministic.py reads
``torch.use_deterministic_algorithms``'s docstring and checks each kernel's caller string
in the CUDA build's libraries); each alert is raised where CUDA raises it, with torch's
text, under the kernel's condition. Host tensors keep the CPU's behaviour.
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchplace.sim import simulate
from torchplace.sim.rules import _determinism

_ROOT = Path(__file__).resolve().parents[1]


def _generator() -> Any:
    path = _ROOT / "tools/gen_deterministic.py"
    spec = importlib.util.spec_from_file_location("gen_deterministic", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_table_is_this_torchs_list() -> None:
    generator = _generator()
    generated = generator.generate(verify=False)
    shipped = json.loads(generator.path_for(generated["version"]).read_text())
    assert set(shipped["ops"]) <= set(generated["ops"])
    for name, alerts in generated["ops"].items():  # only what the libraries lack is left out
        kept = shipped["ops"].get(name, [])
        for alert in alerts:
            assert alert in kept or alert.get("caller") in shipped["dropped_not_in_libraries"]
    assert _determinism.alerts_for("aten::avg_pool3d_backward", "")[0]["caller"] == (
        "avg_pool3d_backward_cuda"
    )


@contextmanager
def _deterministic(warn_only: bool = False) -> Iterator[None]:
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


def _raises(run: Callable[[], Any], caller: str | None) -> None:
    with _deterministic():
        if caller is None:
            run()
            return
        with pytest.raises(RuntimeError) as error:
            run()
    assert str(error.value).startswith(
        f"{caller} does not have a deterministic implementation, but you set "
        "'torch.use_deterministic_algorithms(True)'. You can turn off determinism"
    )


def _backward(module: nn.Module, x: torch.Tensor) -> Callable[[], Any]:
    return lambda: module(x).sum().backward()


@pytest.mark.parametrize("values", ["placeholder", "real"])
def test_backward_kernels_raise_where_cuda_has_no_deterministic_one(values: str) -> None:
    with simulate("A100 40GB", values=values):
        x5 = torch.randn(1, 2, 4, 4, 4, device="cuda", requires_grad=True)
        x4 = torch.randn(1, 2, 4, 4, device="cuda", requires_grad=True)
        _raises(_backward(nn.AvgPool3d(2), x5), "avg_pool3d_backward_cuda")
        _raises(_backward(nn.AdaptiveAvgPool2d(3), x4), "adaptive_avg_pool2d_backward_cuda")
        _raises(_backward(nn.MaxPool2d(2), x4), None)  # deterministic on CUDA
        # the kernel raises; F.interpolate, on a CUDA tensor in deterministic mode, runs a
        # decomposition instead (torch/nn/functional.py: its backward is index_put's)
        bilinear = torch._C._nn.upsample_bilinear2d
        _raises(
            lambda: bilinear(x4, None, False, [2.0, 2.0]).sum().backward(),
            "upsample_bilinear2d_backward_out_cuda",
        )
        _raises(_backward(nn.Upsample(scale_factor=2, mode="bilinear"), x4), None)
        _raises(_backward(nn.Upsample(scale_factor=2, mode="nearest"), x4), None)
        grid = torch.rand(1, 3, 3, 2, device="cuda")
        _raises(
            lambda: F.grid_sample(x4, grid, align_corners=False).sum().backward(),
            "grid_sampler_2d_backward_cuda",
        )
        bag = nn.EmbeddingBag(10, 3, mode="max").cuda()
        idx = torch.tensor([[1, 2], [3, 4]], device="cuda")
        _raises(lambda: bag(idx).sum().backward(), "embedding_bag_backward_cuda_max")
        bag.mode = "mean"
        _raises(lambda: bag(idx).sum().backward(), None)
        # on the host, the CPU's kernels: deterministic
        host = torch.randn(1, 2, 4, 4, 4, requires_grad=True)
        _raises(_backward(nn.AvgPool3d(2), host), None)


@pytest.mark.parametrize("values", ["placeholder", "real"])
def test_forward_kernels_and_their_conditions(values: str) -> None:
    with simulate("A100 40GB", values=values):
        logits = torch.randn(2, 3, 4, 4, device="cuda")
        target = torch.zeros(2, 4, 4, dtype=torch.long, device="cuda")
        _raises(lambda: F.nll_loss(logits, target), "nll_loss2d_forward_out_cuda_template")
        _raises(lambda: F.nll_loss(logits, target, reduction="none"), None)
        counts = torch.tensor([0, 1, 1, 3], device="cuda")
        weights = torch.ones(4, device="cuda")
        _raises(lambda: torch.bincount(counts, weights), "_bincount_cuda")
        _raises(lambda: torch.bincount(counts), None)
        src = torch.ones(4, device="cuda")
        dest = torch.ones(3, device="cuda")
        index = torch.tensor([0, 1, 1, 2], device="cuda")
        _raises(lambda: dest.scatter_reduce(0, index, src, "prod"), "scatter_reduce_cuda_kernel")
        _raises(lambda: dest.scatter_reduce(0, index, src, "amax"), None)
        for accumulate in (False, True):  # accumulating on CUDA uses atomicAdd
            _raises(lambda a=accumulate: dest.put_(index[:2], src[:2], accumulate=a), "put_")
        _raises(lambda: torch.median(logits, 1), "median CUDA with indices output")
        _raises(lambda: torch.median(logits), None)
        _raises(lambda: torch.mm(logits[0, 0], logits[0, 0]), None)  # no cuBLAS check in 2.14
        cumsum = "cumsum_cuda_kernel" if _determinism.alerts_for("aten::cumsum", "") else None
        _raises(lambda: torch.cumsum(logits, 0), cumsum)  # 2.13 raises, 2.14 does not


def test_warn_only_warns_at_the_users_line_with_torchs_text() -> None:
    with simulate("A100 40GB"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = torch.randn(100, device="cuda")
        q = torch.randn(1, 2, 8, 16, device="cuda", requires_grad=True)  # fp32: efficient
        with _deterministic(warn_only=True):
            torch.histc(x)
            F.scaled_dot_product_attention(q, q, q).sum().backward()
            F.scaled_dot_product_attention(q, q, q).sum().backward()
    texts = [str(w.message) for w in caught]
    assert texts[0] == (
        "_histc_cuda with floating point input does not have a deterministic implementation, "
        "but you set 'torch.use_deterministic_algorithms(True, warn_only=True)'. You can file "
        "an issue at https://github.com/pytorch/pytorch/issues to help us prioritize adding "
        "deterministic support for this operation."
    )
    # attention_backward.cu's TORCH_WARN_ONCE
    assert (
        texts.count(
            "Memory Efficient attention defaults to a non-deterministic algorithm. To explicitly "
            "enable determinism call torch.use_deterministic_algorithms(True, warn_only=False)."
        )
        == 1
    )
    assert caught[-1].filename == __file__


def test_fill_uninitialized_memory_as_on_cuda() -> None:
    with simulate("A100 40GB", values="real"), _deterministic():
        assert torch.empty(3, device="cuda").isnan().all()
        assert (torch.empty(2, dtype=torch.int64, device="cuda") == 2**63 - 1).all()
