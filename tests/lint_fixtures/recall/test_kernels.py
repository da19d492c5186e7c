"""Tests of a small ops library: CPU tests everywhere, GPU tests where there is one."""
import pytest
import torch

from ops import fused_softmax, pack_sequences

requires_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@requires_gpu
def test_fused_softmax_matches_torch_on_gpu():
    x = torch.randn(64, 1024, device="cuda")
    torch.testing.assert_close(fused_softmax(x), torch.softmax(x, -1))


def test_fused_softmax_matches_torch_on_cpu():
    x = torch.randn(64, 1024)
    torch.testing.assert_close(fused_softmax(x), torch.softmax(x, -1))


def test_pack_sequences_round_trip(tmp_path):
    seqs = [torch.arange(n) for n in (3, 5, 2)]
    packed = pack_sequences(seqs)
    torch.save(packed, tmp_path / "packed.pt")
    loaded = torch.load(tmp_path / "packed.pt")  # planted: TPL302
    assert torch.equal(loaded.data, packed.data)


def test_device_is_kept():
    packed = pack_sequences([torch.ones(4).cuda()])  # planted: TPL203 TPL206
    assert packed.data.device.type == "cuda"
