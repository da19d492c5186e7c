import pytest
import torch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_training_step_runs_on_the_gpu():
    model = torch.nn.Linear(64, 1).cuda()
    x, y = torch.randn(256, 64, device="cuda"), torch.randn(256, 1, device="cuda")
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    assert model.weight.grad.is_cuda and loss.item() > 0


@pytest.mark.sim_gpu("A100 40GB")
def test_step_fits_in_40gb(sim):
    model = torch.nn.Linear(4096, 4096).cuda()  # 64 MiB of fp32 weights
    model(torch.randn(64, 4096, device="cuda")).sum().backward()
    assert sim.peak_allocated_bytes(0) < 200 * 2**20
    assert sim.transfers("h2d").count == 2  # weight and bias, nothing else
    assert sim.syncs() == []  # nothing waited for the GPU
