"""The cost model's arithmetic against hand-computed cases."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from torchplace import catalog
from torchplace.cost import (
    GPU_LAUNCH_SECONDS,
    TOP_LEVEL,
    OpCost,
    Peaks,
    StepEstimate,
    estimate,
    op_cost,
    precision_of,
    transfer_seconds,
)

aten = torch.ops.aten
META = torch.device("meta")


@pytest.fixture
def h100() -> Peaks:
    """The H100's datasheet peaks priced by the roofline alone (no kernel-time model):
    the arithmetic these tests check by hand."""
    peaks = Peaks.from_spec(catalog.lookup("H100"), launch_seconds=GPU_LAUNCH_SECONDS)
    return dataclasses.replace(peaks, timing=None)


def _meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=META)


def test_h100_peaks_come_from_the_catalog() -> None:
    h100 = Peaks.from_spec(catalog.lookup("H100"))
    assert h100.flops_per_s["bf16"] == pytest.approx(989.4e12)
    assert h100.bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.host_bandwidth_bytes_per_s == pytest.approx(64e9)
    assert h100.timing is not None and h100.timing.sms == 132
    assert h100.launch_seconds == h100.timing.kernel_overhead  # the time model's
    assert not h100.measured and "catalog" in h100.source
    assert h100.memory_bytes == catalog.lookup("H100").torch_total_bytes


def test_catalog_peaks_price_by_kernel_class_and_charge_the_host() -> None:
    h100 = Peaks.from_spec(catalog.lookup("H100"))
    a = _meta(4096, 4096, dtype=torch.bfloat16)
    c = op_cost(aten.mm.default, (a, a), {}, a @ a, h100)
    assert c.signature == ("gemm", 4096, 4096, 4096, 1, "bf16", c.bytes)
    assert c.bound == "compute" and c.host > 0
    assert c.seconds > 2 * 4096**3 / 989.4e12  # no faster than the datasheet peak
    view = op_cost(aten.t.default, (a,), {}, a.t(), h100)
    assert (view.seconds, view.host, view.signature) == (0.0, 0.0, None)


def test_bf16_matmul_4096_on_h100_is_compute_bound(h100: Peaks) -> None:
    n = 4096
    a, b = _meta(n, n, dtype=torch.bfloat16), _meta(n, n, dtype=torch.bfloat16)
    c = op_cost(aten.mm.default, (a, b), {}, a @ b, h100)
    flops, nbytes = 2 * n**3, 3 * n * n * 2
    assert c.op == "aten.mm"
    assert c.flops == flops
    assert c.bytes == nbytes
    compute, memory = flops / 989.4e12, nbytes / 3.35e12
    assert compute > memory
    assert c.seconds == pytest.approx(compute + 5e-6, rel=1e-12)
    assert c.bound == "compute"


def test_elementwise_add_is_memory_bound(h100: Peaks) -> None:
    n = 2**24
    a, b = _meta(n), _meta(n)
    c = op_cost(aten.add.Tensor, (a, b), {}, a + b, h100)
    assert c.flops == 0  # PyTorch's FLOP rules count matmul, convolution and attention only
    assert c.bytes == 3 * n * 4
    assert c.seconds == pytest.approx(3 * n * 4 / 3.35e12 + 5e-6, rel=1e-12)
    assert c.bound == "memory"


def test_tiny_op_is_launch_bound(h100: Peaks) -> None:
    a = _meta(8)
    c = op_cost(aten.mul.Tensor, (a, a), {}, a * a, h100)
    assert c.bound == "launch"
    assert c.seconds == pytest.approx(5e-6 + 64 / 3.35e12)


@pytest.mark.parametrize(
    ("func", "make"),
    [
        (aten.view.default, lambda x: (x, [16, 4])),
        (aten.t.default, lambda x: (x,)),
        (aten.expand.default, lambda x: (x[None], [3, 8, 8])),
        (aten.as_strided.default, lambda x: (x, [4], [1])),
        (aten.detach.default, lambda x: (x,)),
        (aten.permute.default, lambda x: (x, [1, 0])),
        (aten._unsafe_view.default, lambda x: (x, [64])),
        (aten.empty.memory_format, lambda x: ([1024, 1024],)),
    ],
)
def test_views_and_metadata_cost_nothing(h100: Peaks, func: object, make: object) -> None:
    x = _meta(8, 8)
    args = make(x)  # type: ignore[operator]
    out = func(*args)  # type: ignore[operator]
    c = op_cost(func, args, {}, out, h100)
    assert (c.flops, c.bytes, c.seconds, c.bound) == (0.0, 0, 0.0, "none")


def test_broadcast_input_is_read_once(h100: Peaks) -> None:
    a, row = _meta(1024, 1024), _meta(1024)
    expanded = row.expand(1024, 1024)  # stride 0: one row in memory
    c = op_cost(aten.add.Tensor, (a, expanded), {}, a + expanded, h100)
    assert c.bytes == (1024 * 1024 + 1024 + 1024 * 1024) * 4


def test_copy_does_not_read_its_destination(h100: Peaks) -> None:
    dst, src = _meta(1000), _meta(1000)
    c = op_cost(aten.copy_.default, (dst, src), {}, dst, h100)
    assert c.bytes == 2 * 4000


def test_inplace_add_reads_and_writes_self(h100: Peaks) -> None:
    a, b = _meta(1000), _meta(1000)
    c = op_cost(aten.add_.Tensor, (a, b), {}, a, h100)
    assert c.bytes == 3 * 4000


def test_tf32_uses_the_tf32_peak(h100: Peaks) -> None:
    n = 8192
    a, b = _meta(n, n), _meta(n, n)
    fp32 = op_cost(aten.mm.default, (a, b), {}, a @ b, h100)
    tf32 = op_cost(aten.mm.default, (a, b), {}, a @ b, h100, tf32=True)
    flops = 2 * n**3
    assert fp32.seconds == pytest.approx(flops / 67e12 + 5e-6)
    assert tf32.seconds == pytest.approx(flops / 494.7e12 + 5e-6)


def test_conv_flops_follow_pytorch_formula(h100: Peaks) -> None:
    x, w = _meta(8, 64, 56, 56), _meta(128, 64, 3, 3)
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    out = aten.convolution.default(*args)
    c = op_cost(aten.convolution.default, args, {}, out, h100)
    assert c.flops == 2 * 8 * 128 * 56 * 56 * 64 * 3 * 3
    assert c.bytes == (x.numel() + w.numel() + out.numel()) * 4


def test_formula_flops_are_remembered_by_shapes_and_arguments(h100: Peaks) -> None:
    # the second pricing of the same shapes comes from the cache; other shapes or another
    # stride (a non-tensor argument) are priced anew
    def conv_flops(batch: int, stride: int) -> float:
        x, w = _meta(batch, 64, 56, 56), _meta(128, 64, 3, 3)
        args = (x, w, None, [stride, stride], [1, 1], [1, 1], False, [0, 0], 1)
        out = aten.convolution.default(*args)
        return op_cost(aten.convolution.default, args, {}, out, h100).flops

    assert conv_flops(8, 1) == conv_flops(8, 1) == 2 * 8 * 128 * 56 * 56 * 64 * 3 * 3
    assert conv_flops(2, 1) == 2 * 2 * 128 * 56 * 56 * 64 * 3 * 3
    assert conv_flops(8, 2) == 2 * 8 * 128 * 28 * 28 * 64 * 3 * 3


def test_fake_tensors_are_priced_from_shapes(h100: Peaks) -> None:
    with FakeTensorMode():
        a = torch.empty(256, 512)
        b = torch.empty(512, 128)
        out = a @ b
    c = op_cost(aten.mm.default, (a, b), None, out, h100)
    assert c.flops == 2 * 256 * 512 * 128
    assert c.bytes == (256 * 512 + 512 * 128 + 256 * 128) * 4


def test_dtype_without_own_peak_falls_back_to_fp32() -> None:
    t4 = Peaks.from_spec(catalog.lookup("T4"))
    assert "bf16" not in t4.flops_per_s
    assert t4.flops_for(torch.bfloat16) == t4.flops_per_s["fp32"]
    assert precision_of(torch.int64) == "fp32"
    assert precision_of(torch.float8_e4m3fn) == "fp8"
    assert precision_of(torch.float64) == "fp64"


def test_transfer_seconds_by_host_link(h100: Peaks) -> None:
    nbytes = 4 * 1024**3
    assert transfer_seconds(nbytes, h100, "h2d") == pytest.approx(nbytes / 64e9 + 5e-6)
    assert transfer_seconds(nbytes, h100, "d2h") == transfer_seconds(nbytes, h100, "h2d")
    with pytest.raises(ValueError, match="'h2d' or 'd2h'"):
        transfer_seconds(1, h100, "sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 0"):
        transfer_seconds(-1, h100)
    cpu = Peaks("cpu", flops_per_s={"fp32": 1e11}, bandwidth_bytes_per_s=2e10)
    with pytest.raises(ValueError, match="no host link"):
        transfer_seconds(1, cpu)


def test_peaks_validation_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="no fp32 peak"):
        Peaks("x", flops_per_s={"bf16": 1e12}, bandwidth_bytes_per_s=1e11)
    with pytest.raises(ValueError, match="unknown precisions \\['int4'\\]"):
        Peaks("x", flops_per_s={"fp32": 1e12, "int4": 1e12}, bandwidth_bytes_per_s=1e11)
    with pytest.raises(ValueError, match="must be positive"):
        Peaks("x", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=0)
    with pytest.raises(ValueError, match="launch_seconds"):
        Peaks("x", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1, launch_seconds=-1)
    spec = dataclasses.replace(catalog.lookup("H100"), peak_flops={"bf16": 1e15})
    with pytest.raises(ValueError, match="no fp32 peak FLOP/s for"):
        Peaks.from_spec(spec)


def test_step_estimate_totals_scopes_and_top_ops() -> None:
    est = StepEstimate()
    est.add(OpCost("aten.mm", 2e9, 1000, 3e-3, "compute"), "Net.fc1")
    est.add(OpCost("aten.mm", 2e9, 1000, 3e-3, "compute"), "Net.fc2")
    est.add(OpCost("aten.relu", 0.0, 500, 1e-3, "memory"), "Net.act")
    est.add(OpCost("aten.sum", 0.0, 8, 5e-6, "launch"))
    est.add(OpCost("aten.view", 0.0, 0, 0.0, "none"), "Net.fc1")
    assert est.seconds == pytest.approx(7.005e-3)
    assert est.flops == 4e9 and est.bytes == 2508
    assert est.total.ops == 4
    assert est.total.seconds_by_bound == pytest.approx(
        {"compute": 6e-3, "memory": 1e-3, "launch": 5e-6}
    )
    assert est.total.bound == "compute"
    assert list(est.scopes) == ["Net.fc1", "Net.fc2", "Net.act", TOP_LEVEL]
    assert est.scopes["Net.act"].bound == "memory"
    assert [name for name, _ in est.top_ops(2)] == ["aten.mm", "aten.relu"]
    d = est.to_dict()
    assert set(d) == {
        "device",
        "measured_peaks",
        "seconds",
        "flops",
        "bytes",
        "ops",
        "bound",
        "seconds_by_bound",
        "host_seconds",
        "wall_seconds",
        "gpu_seconds",
        "scopes",
        "top_ops",
    }
    assert d["top_ops"][0] == {
        "op": "aten.mm",
        "seconds": 6e-3,
        "flops": 4e9,
        "bytes": 2000,
        "ops": 2,
        "bound": "compute",
        "seconds_by_bound": {"compute": 6e-3},
        "host_seconds": 0.0,
    }


def test_step_estimate_queues_kernels_behind_the_host() -> None:
    est = StepEstimate()
    # the host issues a 1 ms kernel in 10 µs: the GPU is the bottleneck
    est.add(OpCost("aten.mm", 0.0, 0, 1e-3, "compute", host=1e-5))
    assert est.seconds == pytest.approx(1e-3 + 1e-5)
    # ten 1 µs kernels, 200 µs of Python each: the host is, and the GPU waits
    for _ in range(10):
        est.add(OpCost("aten.add", 0.0, 0, 1e-6, "launch", host=2e-4))
    assert est.host_clock == pytest.approx(1e-5 + 10 * 2e-4)
    assert est.seconds == pytest.approx(est.host_clock + 1e-6)
    assert est.gpu_seconds == pytest.approx(1e-3 + 10e-6)
    # a long kernel, then a sync: the host waits for the GPU before issuing more
    est.add(OpCost("aten.mm", 0.0, 0, 5e-3, "compute", host=1e-5))
    est.sync()
    assert est.host_clock == est.seconds
    assert est.mark() == (est.seconds, est.gpu_seconds, est.host_seconds)


class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 1024)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(1024, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def test_estimate_counts_forward_and_backward_by_module(h100: Peaks) -> None:
    with torch.device("meta"):
        model = _MLP()
        x = torch.empty(64, 256, requires_grad=True)
    est = estimate(lambda m, x: m(x).sum().backward(), model, x, peaks=h100)
    per_linear = 2 * 64 * 256 * 1024
    # forward, input gradient and weight gradient of both layers
    assert est.flops == 3 * 2 * per_linear
    assert est.scopes["_MLP.fc1"].flops == 3 * per_linear
    assert est.scopes["_MLP.fc2"].flops == 3 * per_linear
    assert est.scopes["_MLP.act"].flops == 0 and est.scopes["_MLP.act"].ops >= 2
    assert est.seconds == pytest.approx(sum(t.seconds for t in est.scopes.values()))
    assert est.peaks is h100
    assert math.isclose(est.to_dict()["seconds"], est.seconds)


def test_estimate_runs_real_tensors_too() -> None:
    peaks = Peaks("toy", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e11)
    a, b = torch.ones(4, 4), torch.ones(4, 4)
    seen: list[torch.Tensor] = []
    est = estimate(lambda: seen.append(a @ b), peaks=peaks)
    assert torch.equal(seen[0], torch.full((4, 4), 4.0))
    assert est.flops == 2 * 4**3 and list(est.scopes) == [TOP_LEVEL]


def test_cpu_flash_attention_uses_pytorchs_sdpa_formula() -> None:
    peaks = Peaks("toy", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e11)
    b, h, s, d = 2, 4, 128, 64
    q = torch.randn(b, h, s, d)
    est = estimate(torch.nn.functional.scaled_dot_product_attention, q, q, q, peaks=peaks)
    assert "aten._scaled_dot_product_flash_attention_for_cpu" in est.ops
    assert est.flops == 2 * (2 * b * h * s * s * d)  # q @ kᵀ and attention @ v
