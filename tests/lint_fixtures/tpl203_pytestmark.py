# near miss: every test of the module is marked
import pytest
import torch

pytestmark = pytest.mark.gpu


def test_sum():
    assert torch.ones(3, device="cuda").sum().item() == 3
