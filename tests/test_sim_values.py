"""Real values: a simulated GPU computes exactly what the CPU computes, and only the values
differ from placeholder mode.

- Bit for bit in fp32: a few training steps (forward, backward, AdamW) of a small CNN and a
  small transformer give the same losses and the same parameters on a simulated H100 with
  real values as the same program run plainly on the CPU. Same ops: the data and the initial
  weights are made on the CPU from the same seed and moved (a GPU draws random numbers from
  its own generator), and both runs use ``AdamW(foreach=True)`` (CUDA's default; the CPU's is
  a per-parameter loop, which rounds the same but is not the same program).
- The same script under ``values="real"`` and ``values="placeholder"``: the same memory
  figures, transfers, syncs, device errors and time estimate; only values differ.
- Data-dependent shapes (boolean masks, ``nonzero``, ``unique``) are exact with real values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchplace.sim import SimReport, simulate


class SmallCNN(nn.Module):
    """Two conv blocks with batch norm and a linear head (CIFAR-sized input)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class SmallTransformer(nn.Module):
    """A two-layer pre-norm causal transformer language model (no dropout: randomness aside,
    every op is deterministic)."""

    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(32, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(
            dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
        h = self.embed(tokens) + self.pos[:n]
        return self.out(self.norm(self.blocks(h, mask=mask, is_causal=True)))


def _cnn_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)


def _lm_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 256, (4, 17), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def _cnn_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x), y)


def _lm_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


MODELS: dict[str, tuple[type[nn.Module], Callable[..., tuple[torch.Tensor, torch.Tensor]], Any]]
MODELS = {
    "cnn": (SmallCNN, _cnn_batch, _cnn_loss),
    "transformer": (SmallTransformer, _lm_batch, _lm_loss),
}


def _train(name: str, device: str, steps: int = 3) -> tuple[list[float], dict[str, torch.Tensor]]:
    """``steps`` AdamW steps on ``device``: the losses and the final parameters (on the CPU)."""
    cls, batch, loss_fn = MODELS[name]
    torch.manual_seed(0)
    model = cls().to(device)  # weights drawn on the CPU, then moved
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    x, y = (t.to(device) for t in batch())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_real_values_equal_a_plain_cpu_run_bit_for_bit(name: str) -> None:
    cpu_losses, cpu_state = _train(name, "cpu")
    with simulate("H100", values="real"):
        sim_losses, sim_state = _train(name, "cuda")
    assert sim_losses == cpu_losses  # exact float equality, not closeness
    assert cpu_losses[-1] < cpu_losses[0]  # it learns: the comparison is not of constants
    assert sim_state.keys() == cpu_state.keys()
    for key, value in cpu_state.items():
        assert sim_state[key].device.type == "cpu"
        assert torch.equal(sim_state[key], value), key


def _script(name: str) -> str:
    """What both value modes run (no value steers the control flow); PyTorch's device error
    for a CPU batch fed to the CUDA model."""
    cls, batch, loss_fn = MODELS[name]
    torch.manual_seed(0)
    model = cls().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = (t.cuda() for t in batch())
    for _ in range(2):
        opt.zero_grad()
        loss_fn(model, x, y).backward()
        opt.step()
    keep = torch.empty(3 * 2**20, device="cuda")  # 12 MiB live at the end
    keep.cpu()
    float(loss_fn(model, x, y))  # a read: one sync
    with pytest.raises(RuntimeError, match=r"device|type") as error:
        model(x.cpu())  # a CPU batch into a CUDA model
    return str(error.value)


def _run(name: str, values: str) -> tuple[SimReport, str]:
    with simulate("A100 40GB", values=values) as report:
        error = _script(name)
    return report, error


@pytest.mark.parametrize("name", sorted(MODELS))
def test_placeholder_and_real_values_give_the_same_memory_transfers_and_syncs(name: str) -> None:
    (real, real_error), (placeholder, placeholder_error) = (
        _run(name, "real"),
        _run(name, "placeholder"),
    )
    assert (real.values, placeholder.values) == ("real", "placeholder")
    assert real_error == placeholder_error
    assert real.transfers == placeholder.transfers
    assert real.transfers["d2h"]["count"] >= 2
    assert real.syncs == placeholder.syncs and real.syncs
    assert real.oom is None and placeholder.oom is None
    for a, b in zip(real.devices, placeholder.devices, strict=True):
        assert a.peak_allocated_bytes == b.peak_allocated_bytes > 12 * 2**20
        assert a.peak_reserved_bytes == b.peak_reserved_bytes
        assert a.peak_breakdown == b.peak_breakdown


@pytest.mark.parametrize("name", sorted(MODELS))
def test_placeholder_and_real_values_give_the_same_time_estimate(name: str) -> None:
    (real, _), (placeholder, _) = _run(name, "real"), _run(name, "placeholder")
    for a, b in zip(real.devices, placeholder.devices, strict=True):
        assert a.estimate["ops"] == b.estimate["ops"]
        assert a.estimated_total_seconds == pytest.approx(b.estimated_total_seconds)


def test_data_dependent_shapes_are_exact_with_real_values() -> None:
    x = torch.tensor([[0.5, -1.0, 2.0], [-0.25, 3.0, -4.0]])
    with simulate("H100", values="real") as report:
        g = x.cuda()
        masked = g[g > 0]
        nz = torch.nonzero(g < 0)
        uniq = torch.unique(torch.tensor([3, 1, 3, 2, 1], device="cuda"))
        assert masked.is_cuda and nz.is_cuda and uniq.is_cuda
        got = (masked.cpu(), nz.cpu(), uniq.cpu())
    assert torch.equal(got[0], x[x > 0])
    assert torch.equal(got[1], torch.nonzero(x < 0))
    assert got[2].tolist() == [1, 2, 3]
    kinds = {s["kind"] for s in report.syncs}
    assert {"nonzero (boolean mask)", "nonzero"} <= kinds
