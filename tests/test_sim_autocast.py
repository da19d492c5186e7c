"""CUDA autocast on simulated GPUs: torch's own AutocastCUDA table, applied in the dispatcher.

The table (src/torchplace/data/cuda_autocast_<version>.json) is generated from the
installed torch's dispatcher by tools/gen_autocast.py; each policy's rule is
aten/src/ATen/autocast_mode.h's. The cases below are ones no hand-written list had: ops a
composite calls inside (einsum's bmm), the banned and promote errors, fp32_set_opt_dtype,
cuDNN RNNs' fixed float16.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchplace.sim import simulate
from torchplace.sim.rules import _autocast

_ROOT = Path(__file__).resolve().parents[1]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_autocast", _ROOT / "tools/gen_autocast.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_table_is_this_torchs_dispatcher() -> None:
    generated = _generator().generate()
    assert _autocast.table() == generated["ops"]
    shipped = json.loads(_generator().path_for(generated["version"]).read_text())
    assert shipped["ops"] == generated["ops"]
    policies = {e["policy"] for e in generated["ops"].values()}
    assert policies == {
        "lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype", "promote",
        "banned", "cudnn_rnn",
    }  # fmt: skip
    assert _autocast.policy_of("aten::einsum") == "lower_precision_fp"
    assert _autocast.policy_of("aten::add.Tensor") is None


def test_a_composite_operators_inner_matmul_runs_in_the_autocast_dtype() -> None:
    # einsum is on CUDA's lower-precision list, and so is the bmm torch.tensordot's
    # promote kernel... runs under: promote keeps float32 for fp32 inputs
    with simulate("A100 40GB"):
        a = torch.randn(4, 8, device="cuda")
        b = torch.randn(8, 3, device="cuda")
        with torch.autocast("cuda"):
            assert torch.einsum("ij,jk->ik", a, b).dtype == torch.float16
            assert torch.tensordot(a, b, dims=1).dtype == torch.float32
            assert (a @ b).dtype == torch.float16
            assert torch.cdist(a, a).dtype == torch.float32
        assert torch.einsum("ij,jk->ik", a, b).dtype == torch.float32


def test_set_opt_dtype_ops_pass_float32_instead_of_casting() -> None:
    with simulate("A100 40GB"):
        x = torch.randn(4, 8, device="cuda", dtype=torch.float16, requires_grad=True)
        with torch.autocast("cuda"):
            y = x.softmax(-1)
            s = x.sum()
            z = x.softmax(-1, dtype=torch.float16)  # a dtype given is respected
        assert (y.dtype, s.dtype, z.dtype) == (torch.float32, torch.float32, torch.float16)
        assert type(s.grad_fn).__name__ == "SumBackward0"  # summed in fp32, x not cast
        assert type(s.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"


def test_banned_and_promote_errors_are_cudas() -> None:
    with simulate("A100 40GB"):
        p = torch.rand(4, device="cuda")
        with torch.autocast("cuda"), pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p)
        bf16 = torch.ones(4, device="cuda", dtype=torch.bfloat16)
        half = torch.ones(4, device="cuda", dtype=torch.float16)
        with (
            torch.autocast("cuda"),
            pytest.raises(RuntimeError, match="Unexpected floating ScalarType"),
        ):
            torch.addcmul(half, bf16, half)
        with torch.autocast("cuda"):  # float32 wins over float16; doubles do not take part
            assert torch.addcmul(half, half, p).dtype == torch.float32
            assert torch.mm(p.double().view(2, 2), p.double().view(2, 2)).dtype == torch.float64


def test_host_tensors_and_nested_regions_are_left_alone() -> None:
    with simulate("A100 40GB"):
        w = torch.randn(8, 8, device="cuda")
        with torch.autocast("cuda"):
            assert torch.mm(torch.randn(2, 2), torch.randn(2, 2)).dtype == torch.float32
            with torch.autocast("cuda", enabled=False):
                assert torch.mm(w, w).dtype == torch.float32
            assert torch.mm(w, w).dtype == torch.float16


def test_weights_are_cast_once_per_region_and_gradients_reach_them() -> None:
    with simulate("A100 40GB"):
        lin = nn.Linear(64, 64).cuda()
        x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert torch.get_autocast_dtype("cuda") == torch.bfloat16
            lin(x)  # casts (and caches) the weight and bias; cuBLAS takes its workspace
            before = torch.cuda.memory_allocated()
            out = lin(lin(x))
            assert out.dtype == torch.bfloat16
            held = torch.cuda.memory_allocated() - before
        out.float().sum().backward()
        assert lin.weight.grad is not None and lin.weight.grad.dtype == torch.float32
    # the cast input and the two outputs (one 512-byte block each): no new weight copy
    assert held == 3 * 1024


def test_cudnn_rnns_run_in_float16_whatever_the_autocast_dtype() -> None:
    # aten/src/ATen/cudnn/AutocastRNN.cpp casts to kHalf
    with simulate("A100 40GB"):
        lstm = nn.LSTM(16, 32, batch_first=True).cuda()
        x = torch.randn(2, 5, 16, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out, (h, c) = lstm(x)
        assert (out.dtype, h.dtype, c.dtype) == (torch.float16,) * 3
        # bfloat16 input: cuDNN does not take it (cudnn_is_acceptable), the native kernels'
        # matmuls run in the autocast dtype
        lstm.bfloat16()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert lstm(x.bfloat16())[0].dtype == torch.bfloat16


def test_grad_scaler_and_custom_fwd_run_as_on_a_gpu() -> None:
    class Double(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
        def forward(ctx: Any, a: torch.Tensor) -> torch.Tensor:
            assert not torch.is_autocast_enabled("cuda")
            return torch.mm(a, a)

        @staticmethod
        @torch.amp.custom_bwd(device_type="cuda")
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            return g

    with simulate("T4"):
        lin = nn.Linear(8, 8).cuda()
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cuda")
        with torch.autocast("cuda"):
            h = lin(torch.randn(8, 8, device="cuda"))
            assert h.dtype == torch.float16
            assert Double.apply(h).dtype == torch.float32
            loss = Double.apply(h).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        assert scaler.get_scale() in (65536.0, 32768.0)


def test_the_generator_observes_the_same_after_torch_compile() -> None:
    # torch.compile gives a CUDA build's process a current device; probes made on "cuda"
    # without an index then read log_softmax.int's no-op to(float32) as a cast (the full
    # suite on torch 2.14 CUDA failed the shipped-table test after an earlier compile)
    compiled = torch.compile(lambda x: x.sin() + 1, backend="eager")
    compiled(torch.randn(3))
    generator = _generator()
    assert generator.classify(torch.ops.aten.log_softmax.int) == {"policy": "fp32_set_opt_dtype"}
    assert generator.classify(torch.ops.aten.softmax.int) == {"policy": "fp32_set_opt_dtype"}
