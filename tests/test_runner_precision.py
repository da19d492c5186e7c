"""Precision rules: which device can train in which precision (GPU cases via patched seams)."""

from __future__ import annotations

import warnings

import pytest
import torch

from torchplace.runner import precision as precision_module
from torchplace.runner import resolve_precision

CPU = torch.device("cpu")
CUDA0 = torch.device("cuda", 0)


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """A pretend CUDA GPU: set ``capability`` and ``name``; the precision rules ask them."""
    fake: dict[str, object] = {"capability": (8, 0), "name": "NVIDIA A100-SXM4-80GB"}
    monkeypatch.setattr(precision_module, "_is_rocm", lambda: False)
    monkeypatch.setattr(precision_module, "_cuda_capability", lambda index: fake["capability"])
    monkeypatch.setattr(precision_module, "_cuda_name", lambda index: fake["name"])
    return fake


@pytest.mark.parametrize(
    ("given", "name", "dtype"),
    [
        ("32", "32", None),
        (32, "32", None),
        ("32-true", "32", None),
        ("bf16-mixed", "bf16-mixed", torch.bfloat16),
        ("bf16", "bf16-mixed", torch.bfloat16),
        ("BF16-Mixed", "bf16-mixed", torch.bfloat16),
    ],
)
def test_cpu_precisions_and_aliases(given: str | int, name: str, dtype: torch.dtype | None) -> None:
    p = resolve_precision(given, CPU)
    assert (p.name, p.dtype, p.scaled) == (name, dtype, False)
    assert p.grad_scaler() is None


def test_unknown_precision_lists_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown precision 'half'.*'32', 'bf16-mixed', '16-mixed'"
    ):
        resolve_precision("half", CPU)


def test_fp16_on_an_explicit_cpu_is_an_error_that_names_the_alternative() -> None:
    with pytest.raises(ValueError, match=r"'16-mixed'.*needs a CUDA GPU.*cpu.*'bf16-mixed'"):
        resolve_precision("16-mixed", CPU)


def test_fp16_on_an_automatic_cpu_switches_to_bf16_with_a_warning() -> None:
    with pytest.warns(UserWarning, match=r"uses 'bf16-mixed' instead"):
        p = resolve_precision(16, CPU, auto=True)
    assert (p.name, p.dtype) == ("bf16-mixed", torch.bfloat16)


def test_fp16_on_mps_is_an_error_even_when_automatic() -> None:
    with pytest.raises(ValueError, match=r"needs a CUDA GPU, but the device is mps:0: use .*'32'"):
        resolve_precision("16-mixed", torch.device("mps", 0), auto=True)


def test_fp16_on_cuda_has_a_grad_scaler(gpu: dict[str, object]) -> None:
    gpu["capability"] = (7, 5)  # fp16 works on any CUDA GPU
    p = resolve_precision("16-mixed", CUDA0)
    assert (p.name, p.dtype, p.scaled) == ("16-mixed", torch.float16, True)


def test_bf16_on_ampere_is_fine(gpu: dict[str, object]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = resolve_precision("bf16-mixed", CUDA0)
    assert p.dtype == torch.bfloat16


def test_bf16_on_a_pre_ampere_gpu_is_an_error_naming_gpu_capability_and_fix(
    gpu: dict[str, object],
) -> None:
    gpu["capability"], gpu["name"] = (7, 5), "Tesla T4"
    with pytest.raises(ValueError) as info:
        resolve_precision("bf16-mixed", torch.device("cuda", 1), auto=True)
    message = str(info.value)
    assert "cuda:1 (Tesla T4) has 7.5" in message
    assert "compute capability 8.0" in message
    assert "precision='16-mixed'" in message


def test_bf16_on_rocm_is_fine_whatever_the_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision_module, "_is_rocm", lambda: True)
    monkeypatch.setattr(precision_module, "_cuda_capability", lambda index: (0, 0))
    assert resolve_precision("bf16-mixed", CUDA0).name == "bf16-mixed"


def test_autocast_runs_matmuls_in_the_precision_dtype_on_cpu() -> None:
    layer = torch.nn.Linear(4, 4)
    x = torch.ones(2, 4)
    with resolve_precision("bf16-mixed", CPU).autocast():
        assert layer(x).dtype == torch.bfloat16
    with resolve_precision("32", CPU).autocast():
        assert layer(x).dtype == torch.float32
