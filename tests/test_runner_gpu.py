"""The Runner on a CUDA GPU: pinned, prefetched batches, fp16 with a GradScaler, bf16,
checkpoints across devices. On a real GPU where there is one, else on a simulated H100
(tests/conftest.py), so CPU-only CI runs them too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from torchplace.runner import Runner, load, save

pytestmark = pytest.mark.gpu


def _data() -> DataLoader[tuple[torch.Tensor, ...]]:
    x = torch.randn(512, 16)
    return DataLoader(TensorDataset(x, (x.sum(1) > 0).long()), batch_size=64, shuffle=True)


def _train(runner: Runner) -> tuple[nn.Module, float]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 2))
    model, opt = runner.setup(net, torch.optim.AdamW(net.parameters(), lr=1e-2))
    loader = runner.loader(_data())
    assert loader.dataloader.pin_memory  # type: ignore[attr-defined]
    loss = torch.zeros(())
    for _ in range(5):
        for x, y in loader:
            assert x.device == runner.device and y.device == runner.device
            with runner.autocast():
                loss = F.cross_entropy(model(x), y)
            runner.backward(loss)
            runner.step(opt)
    return net, float(loss)


def test_gpu_training_with_prefetched_pinned_batches_learns() -> None:
    runner = Runner("cuda")
    net, loss = _train(runner)
    assert next(net.parameters()).device == runner.device
    assert loss < 0.3


def test_gpu_fp16_trains_through_the_grad_scaler() -> None:
    runner = Runner("cuda", precision="16-mixed")
    assert runner.scaler is not None and runner.scaler.is_enabled()
    _, loss = _train(runner)
    assert loss < 0.3 and runner.scaler.get_scale() > 0


def test_gpu_bf16_follows_the_compute_capability() -> None:
    if torch.cuda.get_device_capability(0) >= (8, 0):
        _, loss = _train(Runner("cuda", precision="bf16-mixed"))
        assert loss < 0.3
    else:
        with pytest.raises(ValueError, match=r"compute capability 8\.0"):
            Runner("cuda", precision="bf16-mixed")


@pytest.mark.sim_gpu("T4")
def test_bf16_is_refused_on_a_simulated_t4() -> None:
    """The other branch of the test above, whatever GPU this machine has: a T4 is sm_75."""
    assert torch.cuda.get_device_capability(0) == (7, 5)
    with pytest.raises(ValueError, match=r"compute capability 8\.0"):
        Runner("cuda", precision="bf16-mixed")


def test_gpu_checkpoint_loads_into_a_cpu_model_and_restores_the_cuda_generator(
    tmp_path: Path,
) -> None:
    runner = Runner("cuda")
    net, _ = _train(runner)
    torch.cuda.manual_seed_all(5)
    save(tmp_path / "c.pt", model=net)
    expected = torch.rand(4, device="cuda")
    cpu_model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 2))
    torch.cuda.manual_seed_all(6)
    load(tmp_path / "c.pt", model=cpu_model)
    assert torch.equal(torch.rand(4, device="cuda"), expected)
    for a, b in zip(cpu_model.state_dict().values(), net.state_dict().values(), strict=True):
        assert a.device.type == "cpu" and torch.equal(a, b.cpu())
