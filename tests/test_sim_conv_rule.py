"""Convolutions that mix devices raise what the backend CUDA's PyTorch picks raises.

Convolution.cpp's ``_select_conv_backend`` decides which check meets the call: cuDNN and
MKLDNN compare types ("Input type (...) and weight type (...) should be the same"), every
other backend's kernel checks devices in its generated CUDA wrapper. A real H200 (torch 2.11)
raised the slow kernel's error for a one-image CPU batch; see tests/conformance/README.md.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchplace.sim import simulate

_SAME = "Expected all tensors to be on the same device, but got "


def _types(inp: str, name: str, other: str) -> str:
    return f"Input type ({inp}) and {name} type ({other}) should be the same"


_MKLDNN = " or input should be a MKLDNN tensor and weight is a dense tensor"


def _error(fn: object) -> str:
    with simulate("H100", gpus=2), pytest.raises(RuntimeError) as info:
        fn()  # type: ignore[operator]
    return str(info.value)


@pytest.mark.parametrize(
    ("batch", "kernel", "channels"), [(1, 3, 3), (2, 3, 3), (1, 5, 3), (1, 1, 3), (1, 3, 64)]
)
def test_a_cpu_input_takes_the_backend_torch_picks_for_it(
    batch: int, kernel: int, channels: int
) -> None:
    x = torch.randn(batch, channels, 12, 12)
    backend = torch._C._select_conv_backend(
        x, torch.randn(8, channels, kernel, kernel), None, [1, 1], [0, 0], [1, 1], False,
        [0, 0], 1,
    ).name  # fmt: skip
    message = _error(lambda: nn.Conv2d(channels, 8, kernel).cuda()(x))
    if backend == "Mkldnn":
        assert message == _types("torch.FloatTensor", "weight", "torch.cuda.FloatTensor") + _MKLDNN
    else:
        assert backend == "Slow2d"
        assert message == (
            f"{_SAME}weight is on cuda:0, different from other tensors on cpu (when checking "
            "argument in method wrapper_CUDA___slow_conv2d_forward)"
        )


def test_a_cuda_input_meets_cudnns_type_check_and_then_its_device_check() -> None:
    x = torch.randn(2, 3, 8, 8)
    message = _error(lambda: nn.Conv2d(3, 8, 3)(x.cuda()))
    assert message == _types("torch.cuda.FloatTensor", "weight", "torch.FloatTensor")
    # a CPU bias alone: the same check, naming the bias
    message = _error(
        lambda: nn.functional.conv2d(x.cuda(), torch.randn(8, 3, 3, 3).cuda(), torch.randn(8))
    )
    assert message == _types("torch.cuda.FloatTensor", "bias", "torch.FloatTensor")
    # cuda:0 and cuda:1 have the same type: cudnn_convolution's wrapper tells them apart
    message = _error(lambda: nn.Conv2d(3, 8, 3).to("cuda:1")(x.cuda()))
    assert message == (
        f"{_SAME}weight is on cuda:1, different from other tensors on cuda:0 (when checking "
        "argument in method wrapper_CUDA__cudnn_convolution)"
    )


def test_depthwise_transposed_and_dilated_convolutions_name_their_kernels() -> None:
    depthwise = _error(lambda: nn.Conv2d(8, 8, 3, groups=8)(torch.randn(2, 8, 8, 8).cuda()))
    assert depthwise.endswith("(when checking argument in method wrapper_CUDA___conv_depthwise2d)")
    assert "got weight is on cpu, different from other tensors on cuda:0" in depthwise
    one = torch.randn(1, 3, 8, 8)
    transposed = _error(lambda: nn.ConvTranspose2d(3, 8, 3).cuda()(one))
    assert transposed.endswith("wrapper_CUDA_slow_conv_transpose2d)")
    dilated = _error(lambda: nn.Conv2d(3, 8, 3, dilation=2).cuda()(one))
    assert dilated.endswith("wrapper_CUDA__slow_conv_dilated2d)")


def test_matching_devices_and_a_dtype_mismatch_on_one_gpu() -> None:
    with simulate("H100"):
        out = nn.Conv2d(3, 8, 3).cuda()(torch.randn(1, 3, 8, 8).cuda())
        assert out.device == torch.device("cuda", 0)
    # conv2d's own bias check runs first, in torch's code, as on the GPU
    message = _error(lambda: nn.Conv2d(3, 8, 3).cuda().half()(torch.randn(2, 3, 8, 8).cuda()))
    assert message == "Input type (float) and bias type (c10::Half) should be the same"
