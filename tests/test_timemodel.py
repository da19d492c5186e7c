"""The step-time model: each kernel class's terms, the host queue, replay, the report."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchplace
from torchplace import catalog
from torchplace.cost import Peaks, op_cost
from torchplace.timemodel import DeviceModel, params
from torchplace.timemodel.attention import attention_seconds
from torchplace.timemodel.gemm import gemm_seconds
from torchplace.timemodel.kernels import conv_tf32, matmul_tf32, memory_signature
from torchplace.timemodel.memory import launches
from torchplace.timemodel.replay import Op, replay
from torchplace.timemodel.step import summarize

aten = torch.ops.aten
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def a100() -> DeviceModel:
    return DeviceModel.from_spec(catalog.lookup("A100"))


def _meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta")


# --- constants ----------------------------------------------------------------------------


def test_every_constant_has_a_source_and_the_fitted_ones_say_so() -> None:
    p = params.load()
    assert all(p.sources[name].strip() for name in p)
    assert p.fitted("memory.efficiency") and not p.fitted("attention.flash_forward")
    for name in p:
        if p.fitted(name):
            assert "fit" in p.sources[name]


def test_bad_constants_are_refused_with_the_name() -> None:
    good = {
        section: {k: {"value": v["value"], "fitted": v["fitted"], "source": v["source"]}
                  for k, v in table.items()}
        for section, table in _document().items()
    }  # fmt: skip
    params.parse(good)
    bad = json.loads(json.dumps(good))
    bad["memory"]["efficiency"]["value"] = 1.5
    with pytest.raises(ValueError, match=r"memory.efficiency must be a number in \[0.05, 1.0\]"):
        params.parse(bad)
    bad = json.loads(json.dumps(good))
    del bad["memory"]["efficiency"]
    with pytest.raises(ValueError, match=r"lacks \['memory.efficiency'\]"):
        params.parse(bad)
    bad = json.loads(json.dumps(good))
    bad["memory"]["efficiency"]["source"] = " "
    with pytest.raises(ValueError, match=r"memory\.efficiency has no source"):
        params.parse(bad)
    with pytest.raises(ValueError, match="unknown time-model constant"):
        params.load().replace({"memory.speed": 1.0})


def _document() -> dict:  # type: ignore[type-arg]
    import tomllib

    return tomllib.loads((ROOT / "src/torchplace/data/timemodel.toml").read_text())


# --- matrix products ----------------------------------------------------------------------


def _tflops(device: DeviceModel, m: int, n: int, k: int, precision: str = "bf16") -> float:
    element = 2 if precision in ("bf16", "fp16") else 4
    seconds, _ = gemm_seconds(device, m, n, k, 1, precision, (m * k + k * n + m * n) * element)
    return 2 * m * n * k / seconds / 1e12


def test_large_products_reach_the_fitted_fraction_of_the_peak(a100: DeviceModel) -> None:
    reached = _tflops(a100, 8192, 8192, 8192)
    assert reached <= 312 * a100.params["gemm.tensor_core_efficiency"]
    assert reached > 0.9 * 312 * a100.params["gemm.tensor_core_efficiency"]


def test_one_tile_too_many_costs_a_wave(a100: DeviceModel) -> None:
    # 108 SMs: 108 tiles of 256x128 fill one wave; a product one row taller needs more
    exact = _tflops(a100, 256 * 9, 128 * 12, 4096)
    over = _tflops(a100, 256 * 9 + 1, 128 * 12, 4096)
    assert over < exact


def test_small_k_pays_the_pipeline_fill(a100: DeviceModel) -> None:
    assert _tflops(a100, 4096, 4096, 64) < 0.6 * _tflops(a100, 4096, 4096, 4096)


def test_a_matrix_times_a_vector_is_memory_bound(a100: DeviceModel) -> None:
    seconds, bound = gemm_seconds(a100, 1, 4096, 4096, 1, "bf16", 4096 * 4096 * 2)
    assert bound == "memory"
    assert seconds == pytest.approx(4096 * 4096 * 2 / a100.achievable_bandwidth, rel=0.05)


def test_tensor_core_precisions_outrun_float32(a100: DeviceModel) -> None:
    p = a100.params
    expected = 156 * p["gemm.tensor_core_efficiency"] / (19.5 * p["gemm.simt_efficiency"])
    assert _tflops(a100, 4096, 4096, 4096, "fp32") < 19.5
    ratio = _tflops(a100, 4096, 4096, 4096, "tf32") / _tflops(a100, 4096, 4096, 4096, "fp32")
    assert ratio == pytest.approx(expected, rel=0.1)
    t4 = DeviceModel.from_spec(catalog.lookup("T4"))  # no TF32: float32 speed
    assert _tflops(t4, 4096, 4096, 4096, "tf32") == _tflops(t4, 4096, 4096, 4096, "fp32")


def test_split_k_fills_the_gpu_for_few_output_tiles(a100: DeviceModel) -> None:
    # 4 output tiles, K of a million: split-K is the only way to use more than 4 SMs
    assert _tflops(a100, 256, 256, 1 << 20) > 100


def test_matmul_flags_are_read_as_the_script_set_them() -> None:
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert not matmul_tf32()
        torch.set_float32_matmul_precision("high")
        assert matmul_tf32()
    finally:
        torch.set_float32_matmul_precision("highest")
        torch.backends.cuda.matmul.allow_tf32 = before
    assert conv_tf32()  # cuDNN's default


# --- convolutions -------------------------------------------------------------------------


def _conv(peaks: Peaks, *, channels_last: bool, dtype: torch.dtype, k: int = 3) -> float:
    x = _meta(64, 256, 28, 28, dtype=dtype)
    w = _meta(256, 256, k, k, dtype=dtype)
    if channels_last:
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    args = (x, w, None, [1, 1], [k // 2, k // 2], [1, 1], False, [0, 0], 1)
    out = aten.convolution.default(*args)
    return op_cost(aten.convolution.default, args, {}, out, peaks).seconds


def test_tensor_core_convolutions_pay_for_nchw_transposes() -> None:
    a100 = Peaks.from_spec(catalog.lookup("A100"))
    nchw = _conv(a100, channels_last=False, dtype=torch.float16)
    nhwc = _conv(a100, channels_last=True, dtype=torch.float16)
    assert nchw > 1.2 * nhwc


def test_float32_convolutions_follow_cudnns_tf32_flag() -> None:
    a100 = Peaks.from_spec(catalog.lookup("A100"))
    tf32 = _conv(a100, channels_last=True, dtype=torch.float32)
    cudnn = torch.backends.cudnn
    # the context manager: torch.testing._internal (imported by the OpInfo tests) forbids
    # setting the flags directly for the rest of the process
    with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark,
                     deterministic=cudnn.deterministic, allow_tf32=False):  # fmt: skip
        assert not conv_tf32()
        full = _conv(a100, channels_last=True, dtype=torch.float32)
    assert conv_tf32()
    assert full > 2 * tf32


def test_float32_3x3_convolutions_run_winograd() -> None:
    v100 = Peaks.from_spec(catalog.lookup("V100"))
    three = _conv(v100, channels_last=False, dtype=torch.float32, k=3)
    one = _conv(v100, channels_last=False, dtype=torch.float32, k=1)
    # nine times the multiply-adds of the 1x1, 9 / 2.25 = 4 times the time at most
    assert three < 4.5 * one


# --- attention and memory-bound kernels ---------------------------------------------------


def test_attention_kernels_by_architecture_and_mask(a100: DeviceModel) -> None:
    h100 = DeviceModel.from_spec(catalog.lookup("H100"))
    flops, nbytes = 1e12, 1e8
    flash = attention_seconds(a100, ("attn", "flash", False, flops, False, "bf16", nbytes))[0]
    causal = attention_seconds(a100, ("attn", "flash", False, flops, True, "bf16", nbytes))[0]
    efficient = attention_seconds(a100, ("attn", "efficient", False, flops, False, "bf16", nbytes))[
        0
    ]
    backward = attention_seconds(a100, ("attn", "flash", True, flops, False, "bf16", nbytes))[0]
    on_h100 = attention_seconds(h100, ("attn", "flash", False, flops, False, "bf16", nbytes))[0]
    assert causal == pytest.approx(flash / 2, rel=0.01)
    assert efficient > flash and backward > flash
    # FlashAttention-2 on Hopper: half the fraction of a 3.2x larger peak
    assert on_h100 == pytest.approx(
        flash * 312 / 989.4 / a100.params["attention.hopper_factor"], rel=0.01
    )


def test_multi_tensor_kernels_launch_per_chunk_of_tensors() -> None:
    assert launches(0, 1, 0) == 0
    assert launches(110, 1, 110) == 1
    assert launches(111, 1, 111) == 2
    assert launches(100, 4, 100) == 3  # 36 tensors a launch for 4 lists
    assert launches(1, 1, 65536 * 400) == 2  # 400 chunks of one tensor: 320 blocks a launch


def test_batch_norm_reads_its_input_twice_unless_persistent() -> None:
    x = _meta(32, 64, 56, 56, dtype=torch.float16)
    w = _meta(64)
    args = (x, w, w, w, w, True, 0.1, 1e-5)
    out_bytes = x.nbytes
    nchw = memory_signature(aten.native_batch_norm.default, args, x.nbytes + out_bytes)
    cl = x.to(memory_format=torch.channels_last)
    nhwc = memory_signature(aten.native_batch_norm.default, (cl, *args[1:]), x.nbytes + out_bytes)
    assert nchw[1] == 3 * x.nbytes and nhwc[1] == 2 * x.nbytes
    inference = memory_signature(aten.native_batch_norm.default, (*args[:5], False, 0.1, 1e-5),
                                 2 * x.nbytes)  # fmt: skip
    assert inference[1] == 2 * x.nbytes


# --- the step: queue, bound, replay, throughput ---------------------------------------------


class _Tiny(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x).square().mean()


def _train(width: int, batch: int, steps: int = 3) -> torchplace.sim.SimReport:
    with torchplace.simulate("H100", values="placeholder") as report:
        model = _Tiny(width).cuda()
        opt = torch.optim.AdamW(model.parameters())
        x = torch.randn(batch, width, device="cuda")
        for _ in range(steps):
            opt.zero_grad()
            model(x).backward()
            opt.step()
    return report


def test_small_models_are_host_bound_and_large_ones_are_not() -> None:
    small = _train(64, 8).device(0)
    assert small.bound == "host"
    assert small.step["host_seconds"] > small.step["gpu_seconds"]
    large = _train(4096, 8192).device(0)
    assert large.bound in ("compute", "memory")
    assert large.step["gpu_seconds"] > large.step["host_seconds"]
    low, high = large.step["step_range_seconds"]
    assert low < large.estimated_step_seconds < high
    assert large.step["samples_per_second"] == pytest.approx(8192 / large.estimated_step_seconds)


def test_a_sync_makes_the_host_wait_for_the_gpu() -> None:
    def run(sync: bool) -> float:
        with torchplace.simulate("H100", values="placeholder") as report:
            x = torch.randn(8192, 8192, device="cuda")
            for _ in range(20):
                y = x @ x  # 1 ms of GPU work, microseconds of host
                if sync:
                    y.sum().item()
                _ = torch.ones(1, device="cuda") + 1  # host work after the sync
        return report.device(0).estimated_total_seconds

    assert run(sync=True) > run(sync=False)


def test_replay_on_the_same_gpu_gives_the_live_estimate() -> None:
    from torchplace.sim import plan

    report = _train(512, 256)
    state = report.state
    assert state is not None
    total, step = plan.price_steps(state.trace, catalog.lookup("H100"), device=0)
    d = report.device(0)
    assert total == pytest.approx(d.estimated_total_seconds, rel=1e-9)
    assert step["step_seconds"] == pytest.approx(d.estimated_step_seconds, rel=1e-9)
    a100_total, _ = plan.price_steps(state.trace, catalog.lookup("A100"), device=0)
    assert a100_total > total


def test_replay_queues_and_syncs() -> None:
    h100 = DeviceModel.from_spec(catalog.lookup("H100"))
    ops = [
        Op("bf16", ("mem", 1e9, 1), host=1e-5),
        Op("sync", None),
        Op("bf16", ("mem", 8, 1), 1e-5),
    ]
    result = replay(ops, h100, marks=[1])
    first = h100.seconds(("mem", 1e9, 1))[0]
    assert len(result.marks) == 3
    assert result.estimate.host_clock >= first  # the host waited at the sync


def test_inference_steps_are_calls_of_the_outermost_module() -> None:
    with torchplace.simulate("A100", values="placeholder") as report:
        model = torch.nn.Embedding(1000, 64).cuda()
        ids = torch.zeros(4, 128, dtype=torch.long, device="cuda")
        with torch.no_grad():
            for _ in range(3):
                model(ids)
    step = report.device(0).step
    assert step["step_kind"] == "call" and step["steps"] == 2
    assert step["tokens_per_second"] == pytest.approx(4 * 128 / step["step_seconds"])


def test_summarize_needs_two_marks() -> None:
    assert summarize([(0.0,) * 5], [], {}) == {}


# --- --price and the report ----------------------------------------------------------------


def test_price_option_adds_cost_per_thousand_steps_sorted(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(256, 256).cuda()\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "x = torch.randn(64, 256, device='cuda')\n"
        "for _ in range(3):\n"
        "    opt.zero_grad(); m(x).sum().backward(); opt.step()\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "torchplace", "sim", "--gpu", "T4,H100", "--price", "H100=2.5",
         "--price", "t4=0.35", "--json", str(script)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    costs = report["costs"]["usd_per_1000_steps"]
    steps = {g["key"]: g["estimated_step_seconds"] for g in report["plan"]["gpus"]}
    assert costs["h100-sxm-80gb"] == pytest.approx(steps["h100-sxm-80gb"] * 1000 / 3600 * 2.5)
    assert costs["t4"] == pytest.approx(steps["t4"] * 1000 / 3600 * 0.35)
    bad = subprocess.run(
        [sys.executable, "-m", "torchplace", "sim", "--price", "H100", str(script)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode != 0 and "GPU=USD_PER_HOUR" in bad.stderr


def test_plan_table_sorts_by_cost() -> None:
    from torchplace.sim.summary import plan_table

    rows = [
        {"key": k, "name": k, "capacity_bytes": c, "peak_allocated_bytes": 1, "headroom_bytes": 1,
         "peak_reserved_bytes": 1, "estimated_step_seconds": s, "step": {"bound": "compute"}}
        for k, c, s in (("a", 2, 1.0), ("b", 1, 1.0), ("c", 3, 1.0))
    ]  # fmt: skip
    costs = {"usd_per_1000_steps": {"a": 3.0, "c": 1.0}, "usd_per_hour": {}}
    table = plan_table({"gpus": rows, "runs": []}, costs)  # the terminal and the page draw it
    assert [row[0] for row in table.rows] == ["c", "a", "b"]
    cost = table.columns.index("$ / 1,000 steps")
    assert [row[cost] for row in table.rows] == ["$1.00", "$3.00", "-"]
    assert [row[0] for row in plan_table({"gpus": rows, "runs": []}).rows] == ["b", "a", "c"]


def test_catalog_gpus_all_have_a_time_model() -> None:
    for spec in catalog.gpus():
        model = DeviceModel.from_spec(spec)
        seconds, _ = model.seconds(("gemm", 1024, 1024, 1024, 1, "bf16", 6 * 1024 * 1024))
        assert math.isfinite(seconds) and seconds > 0


def test_peaks_without_a_time_model_keep_the_roofline() -> None:
    peaks = dataclasses.replace(Peaks.from_spec(catalog.lookup("H100")), timing=None)
    a = _meta(1024, 1024)
    c = op_cost(aten.mm.default, (a, a), {}, a @ a, peaks)
    assert c.host == 0.0 and c.signature is None
