import unittest

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from helpers import HAS_CUDA, _RunIf, has_triton, onlyCUDA, require_torch_gpu

requires_kernel = pytest.mark.skipif(not has_triton(), reason="needs Triton")


@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_matmul():
    x = torch.randn(4, 4, device="cuda")  # near miss: skipped without CUDA


@_RunIf(min_cuda_gpus=1)
def test_runif():
    torch.ones(2).cuda()  # near miss: a decorator that asks for a GPU


@onlyCUDA
def test_only():
    torch.ones(2).to("cuda")  # near miss


@requires_kernel
def test_kernel():
    torch.zeros(2, device="cuda")  # near miss: a mark bound to a name


@require_torch_gpu
class TestOnGpu(unittest.TestCase):
    def test_add(self):
        torch.ones(2).cuda()  # near miss: the class is marked


class TestHopper(unittest.TestCase):
    def setUp(self):
        if not has_triton():
            self.skipTest("needs Triton")

    def test_fp8(self):
        torch.ones(2, device="cuda")  # near miss: setUp skips the class


def test_early_exit():
    if not has_triton():
        pytest.skip("needs Triton")
    torch.ones(2, device="cuda")  # near miss: skipped before


def test_matmul_cuda():
    torch.ones(2).cuda()  # near miss: a CUDA test by its name


def test_fake_mode():
    with FakeTensorMode():
        torch.empty(1024, 1024, device="cuda")  # near miss: a fake tensor has no memory


def test_expected_device(tensor):
    assert tensor.device == torch.device("cuda")  # near miss: an expected value


def generic_helper(codebook):
    return torch.zeros_like(codebook).cuda()  # expect: TPL203
