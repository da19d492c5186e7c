"""The benchmark suite: projected rows, JSON schema, skips, speed-ups and break-even."""

from __future__ import annotations

import io
import json
import sys

import pytest
import torch
from rich.console import Console

from torchplace import catalog
from torchplace.bench import machine, report, suite
from torchplace.bench.breakeven import attach_speedups, break_even, crossover
from torchplace.bench.results import BREAK_EVEN_KEYS, ROW_KEYS, TOP_KEYS, Row
from torchplace.bench.workloads import Workload
from torchplace.cost import Peaks
from torchplace.timemodel import op_host_seconds

CPU_PEAKS = Peaks(
    "Test CPU",
    flops_per_s={"fp32": 1e11, "bf16": 2e11, "fp16": 1e9},
    bandwidth_bytes_per_s=2e10,
    host_bandwidth_bytes_per_s=None,
    launch_seconds=2e-6,
    measured=True,
    source="measured here (test)",
)


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known CPU peaks and a quiet machine, so runs are quick and deterministic. (The peaks
    are not this machine's, so how far its times are from their roofline says nothing:
    no row is judged not credible here; tests/test_bench.py's flagging test does that.)"""
    monkeypatch.setattr(suite, "measure_cpu_peaks", lambda *, quick: CPU_PEAKS)
    monkeypatch.setattr(suite.credibility, "doubt", lambda **kwargs: None)
    monkeypatch.setattr(machine, "load_average", lambda: 0.0)
    monkeypatch.setattr(machine, "_accelerator_count", lambda: 0)


def _run(**kwargs: object) -> suite.BenchResult:
    options: dict[str, object] = {"quick": True, "limit": 1, "max_run_time": 0.02}
    options.update(kwargs)
    return suite.run_bench(**options)  # type: ignore[arg-type]


def test_projected_rows_are_labelled_everywhere(fast: None) -> None:
    result = _run(gpus=["H100"])
    projected = [r for r in result.rows if r.projected]
    measured = [r for r in result.rows if not r.projected]
    assert {r.device for r in projected} == {"h100-sxm-80gb"}
    assert {r.device for r in measured} == {"cpu"}
    assert {r.op for r in projected} == {"elementwise", "matmul", "conv2d", "copy_h2d", "copy_d2h"}
    for r in projected:
        assert r.iqr_seconds is None and r.runs is None and r.peak_source == "catalog"
    # JSON
    doc = json.loads(json.dumps(result.to_dict()))
    assert all(row["projected"] is (row["device"] != "cpu") for row in doc["rows"])
    # table: every row naming the H100 says "projected" in its own column
    buffer = io.StringIO()
    report.render(result, Console(file=buffer, width=250, color_system=None))
    lines = [
        line
        for line in buffer.getvalue().splitlines()
        if "H100 SXM5" in line and "catalog (datasheet)" not in line  # not the peaks table
    ]
    assert lines and all("projected" in line for line in lines)
    assert all(
        "projected" not in line for line in buffer.getvalue().splitlines() if "│ cpu" in line
    )
    assert any("Projected rows are estimates" in n for n in result.notes)


def test_projected_matmul_row_matches_the_cost_model(fast: None) -> None:
    result = _run(gpus=["H100"], ops=["matmul"], limit=3)
    row = next(r for r in result.rows if r.projected and r.dtype == "bf16" and r.size == 1024)
    n = 1024
    peaks = Peaks.from_spec(catalog.lookup("H100"))
    assert peaks.timing is not None
    kernel, _ = peaks.timing.seconds(("gemm", n, n, n, 1, "bf16", 3 * n * n * 2))
    host = op_host_seconds(peaks.timing.params)
    # timed in a loop: the host's time per call or the kernel's, whichever is longer
    assert row.seconds == pytest.approx(max(kernel, host))
    assert row.bound == ("host" if host > kernel else "compute")
    launch = peaks.launch_seconds
    transfer = (2 * n * n * 2 / 64e9 + launch) + (n * n * 2 / 64e9 + launch)
    assert row.seconds_with_transfer == pytest.approx(row.seconds + transfer)
    cpu = next(r for r in result.rows if r.device == "cpu" and r.dtype == "bf16" and r.size == n)
    assert row.speedup == pytest.approx(cpu.seconds / row.seconds)
    assert row.speedup_with_transfer == pytest.approx(cpu.seconds / row.seconds_with_transfer)
    projected = {r.precision for r in result.rows if r.projected and r.op == "matmul"}
    assert projected == {"fp32", "tf32", "bf16", "fp16"}


def test_json_schema_is_stable(fast: None) -> None:
    doc = _run(gpus=["T4"], ops=["elementwise"]).to_dict()
    assert (
        tuple(doc)
        == TOP_KEYS
        == (
            "schema_version",
            "torchplace",
            "machine",
            "quick",
            "peaks",
            "rows",
            "break_even",
            "notes",
        )
    )
    assert doc["schema_version"] == 1
    row_keys = (
        "op",
        "size",
        "label",
        "dtype",
        "tf32",
        "variant",
        "device",
        "device_name",
        "projected",
        "seconds",
        "iqr_seconds",
        "runs",
        "flops",
        "bytes",
        "metric",
        "peak_fraction",
        "peak_source",
        "bound",
        "predicted_seconds",
        "seconds_with_transfer",
        "speedup",
        "speedup_with_transfer",
        "doubt",
        "achieved_per_s",
    )
    assert row_keys == ROW_KEYS
    assert all(tuple(row) == row_keys for row in doc["rows"])
    assert BREAK_EVEN_KEYS == (
        "op",
        "dtype",
        "tf32",
        "device",
        "device_name",
        "projected",
        "status",
        "size",
        "unit",
        "smallest",
        "largest",
    )
    assert all(tuple(b) == BREAK_EVEN_KEYS for b in doc["break_even"]) and doc["break_even"]
    assert set(doc["machine"]) >= {"cpu", "cpu_count", "torch_threads", "ram_bytes", "torch"}
    assert [p["device"] for p in doc["peaks"]] == ["cpu", "t4"]
    assert doc["peaks"][0]["measured"] is True and doc["peaks"][1]["measured"] is False


def test_unknown_gpu_is_the_catalogs_error(fast: None) -> None:
    with pytest.raises(ValueError, match=r"Unknown GPU 'H900'\. Did you mean"):
        _run(gpus=["H900"])


def test_device_that_is_absent_says_what_exists(fast: None) -> None:
    with pytest.raises(ValueError, match="no such device; it has cpu") as info:
        _run(devices=["cuda"])
    assert "--gpu" in info.value.hint  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="not a device torch understands"):
        _run(devices=["gpu0"])
    with pytest.raises(ValueError, match="unknown operation"):
        _run(ops=["fft"])


def test_sizes_that_do_not_fit_are_skipped_before_allocating(
    fast: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(machine, "_available_ram_bytes", lambda: 200 * 1024)
    sized: list[int] = []
    real_inputs = Workload.inputs

    def inputs(self: Workload, device: torch.device) -> tuple[torch.Tensor, ...]:
        if device.type == "cpu":
            sized.append(self.memory_bytes)
        return real_inputs(self, device)

    monkeypatch.setattr(Workload, "inputs", inputs)
    result = _run(ops=["elementwise"], limit=2)  # 2^12 fits in 100 KiB, 2^16 does not
    assert [r.size for r in result.rows] == [2**12]
    assert all(n <= 100 * 1024 for n in sized)
    assert any(
        n.startswith("skipped elementwise fp32 2^16 elements on cpu: needs 0.00122 GiB")
        and "does not swap" in n
        for n in result.notes
    )


def test_projection_skips_what_the_gpu_lacks(fast: None) -> None:
    result = _run(gpus=["T4"], ops=["matmul"])
    t4 = [r for r in result.rows if r.device == "t4" and r.op == "matmul"]
    assert {r.precision for r in t4} == {"fp32", "fp16"}  # no bf16, no TF32 on a T4
    assert any("T4: the catalog has no bf16 peak" in n for n in result.notes)


def test_projection_skips_sizes_the_gpu_cannot_hold() -> None:
    small = Peaks(
        "Small GPU",
        flops_per_s={"fp32": 1e13},
        bandwidth_bytes_per_s=1e12,
        host_bandwidth_bytes_per_s=1e10,
        memory_bytes=64 * 1024**2,
    )
    result = suite.BenchResult(machine={}, quick=False)
    suite._project(result, "small", small, ["matmul"], quick=False, limit=None)
    sizes = [r.size for r in result.rows if r.op == "matmul"]
    assert sizes == [64, 128, 256, 512, 1024, 2048]  # 4096: 3 × 64 MiB does not fit
    assert any(
        n.startswith("skipped matmul fp32 4096×4096 on Small GPU: needs 0.188 GiB")
        for n in result.notes
    )


def test_cpu_fp16_too_slow_is_skipped_with_the_numbers(fast: None) -> None:
    result = _run(ops=["matmul"])
    assert {r.dtype for r in result.rows} == {"fp32", "bf16"}
    assert any("fp16" in n and "1 GFLOP/s against 100 in fp32" in n for n in result.notes)


def test_lacking_dtypes_on_a_patched_old_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "_cuda_capability", lambda index: (7, 0))
    monkeypatch.setattr(machine, "_cuda_bf16", lambda index: False)
    gpu = torch.device("cuda", 0)
    assert machine.lacks(gpu, "tf32") == "TF32 needs compute capability 8.0+, this GPU has 7.0"
    assert machine.lacks(gpu, "bf16") is not None
    assert machine.lacks(gpu, "fp16") is None


def test_measured_rows_compare_with_measured_peaks(fast: None) -> None:
    result = _run(ops=["elementwise", "matmul"])
    for r in result.rows:
        assert r.peak_source == "measured" and r.runs is not None and r.runs >= 5
        peak = CPU_PEAKS.bandwidth_bytes_per_s if r.metric == "bytes" else 1e11
        if r.dtype == "bf16":
            peak = 2e11
        assert r.peak_fraction == pytest.approx(r.achieved / peak)
    assert any(n.startswith("CPU peaks are measured") for n in result.notes)


def test_busy_machine_is_noted(fast: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "load_average", lambda: 64.0)
    assert any("was busy" in n for n in _run(ops=["elementwise"]).notes)


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([(10, 0.5), (100, 2.0)], ("crossover", 31.6)),
        ([(10, 0.1), (100, 0.5), (1000, 1.0)], ("crossover", 1000.0)),
        ([(10, 2.0), (100, 0.5), (1000, 4.0)], ("mixed", 215.0)),
        ([(10, 1.5), (100, 3.0)], ("accelerator_wins", None)),
        ([(10, 0.2), (100, 0.9)], ("cpu_wins", None)),
        ([(10, 0.2), (100, 2.0), (1000, 0.5)], ("mixed", None)),
        ([(10, 0.1), (100, 1.0)], ("crossover", 100.0)),
    ],
)
def test_crossover(points: list[tuple[int, float]], expected: tuple[str, float | None]) -> None:
    assert crossover(points) == expected


def _row(device: str, size: int, seconds: float, with_transfer: float | None = None) -> Row:
    return Row(
        op="matmul",
        size=size,
        label=str(size),
        dtype="fp32",
        tf32=False,
        variant=None,
        device=device,
        device_name=device,
        projected=device != "cpu",
        seconds=seconds,
        iqr_seconds=None,
        runs=None,
        flops=2.0 * size**3,
        bytes=12 * size**2,
        metric="flops",
        peak_fraction=None,
        peak_source=None,
        bound=None,
        predicted_seconds=None,
        seconds_with_transfer=with_transfer,
    )


def test_speedups_and_break_even_from_rows() -> None:
    rows = [
        _row("cpu", 64, 1e-5),
        _row("cpu", 256, 1e-3),
        _row("cpu", 1024, 1e-1),
        _row("gpu", 64, 5e-6, 4e-5),  # loses once the copies count
        _row("gpu", 256, 6e-6, 4e-4),  # wins by 2.5× with copies
        _row("gpu", 1024, 4e-5, 1e-3),
    ]
    attach_speedups(rows)
    assert [r.speedup for r in rows[3:]] == pytest.approx([2.0, 1e-3 / 6e-6, 2500.0])
    assert [r.speedup_with_transfer for r in rows[3:]] == pytest.approx([0.25, 2.5, 100.0])
    assert rows[0].speedup is None
    (b,) = break_even(rows)
    assert (b.status, b.device, b.unit, b.smallest, b.largest) == (
        "crossover",
        "gpu",
        "matrix side",
        64,
        1024,
    )
    assert b.size is not None and 64 < b.size < 256


def test_rows_a_busy_machine_made_absurd_are_flagged_and_their_speedups_withheld() -> None:
    """A block that waited for the CPU made a 20 µs elementwise take 69 ms, and an H100
    'projected' 6,600× faster than it; a peak measured in such a moment made cached work
    reach 21,398% of it. Neither is shown as a result."""
    from torchplace.bench import credibility
    from torchplace.bench.results import BenchResult

    rows = [
        _row("cpu", 64, 1e-5),  # credible: 2× the roofline
        _row("cpu", 256, 6.9e-2),  # waited: 690× the roofline
        _row("cpu", 1024, 1e-1),
        _row("gpu", 64, 5e-6, 4e-5),
        _row("gpu", 256, 6e-6, 4e-4),
        _row("gpu", 1024, 4e-5, 1e-3),
    ]
    for r, predicted in zip(rows[:3], (5e-6, 1e-4, 8e-2), strict=True):
        r.predicted_seconds, r.projected, r.peak_source = predicted, False, "measured"
    rows[2].iqr_seconds = 0.06  # noisy: the spread is 60% of the median
    rows[3].peak_fraction, rows[3].projected = 213.98, False  # a measured GPU row: 21,398%
    attach_speedups(rows)
    credibility.mark(rows)
    assert rows[0].doubt is None and rows[4].speedup is None is rows[4].speedup_with_transfer
    assert "690× the roofline's time" in (rows[1].doubt or "")
    assert rows[2].doubt == "noisy: the spread (IQR) is 60% of the median"
    assert "21,398% of the peak" in (rows[3].doubt or "")
    assert [r.speedup for r in rows[3:]] == [None, None, None]
    assert break_even(rows) == []  # no crossing drawn from noise
    out = io.StringIO()
    result = BenchResult(machine={}, quick=True, rows=rows)
    report.render(result, Console(file=out, width=250))
    text = out.getvalue()
    assert "6,600" not in text and "11,500" not in text  # the absurd speed-ups are withheld
    assert "? 5 row(s) not credible" in text  # 3 measurements, 2 speed-ups from them
    assert "matmul fp32 256 on cpu: 690× the roofline's time" in text


def test_plot_error_names_the_extra(monkeypatch: pytest.MonkeyPatch, fast: None) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(RuntimeError, match=r"pip install 'torchplace\[plot\]'") as info:
        report.require_matplotlib()
    assert info.value.hint == "pip install 'torchplace[plot]'"  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="matplotlib"):
        report.plot(_run(ops=["elementwise"]), "never-written.png")


def test_an_operation_torch_refuses_is_skipped_with_its_message(
    fast: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Workload, *inputs: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'\nmore detail")

    monkeypatch.setattr(Workload, "__call__", refuse)
    result = _run(ops=["matmul"])
    assert result.rows == []
    assert any(
        n == "skipped matmul fp32 64×64 on cpu: torch says: "
        "\"addmm_impl_cpu_\" not implemented for 'Half'."
        for n in result.notes
    )


@pytest.mark.gpu
def test_real_gpu_rows_transfers_and_copies() -> None:
    # On a simulated GPU the times are the CPU's, not a GPU's: what this checks there is the
    # CUDA code path (events, synchronisation, pinned and pageable copies) and the rows' shape.
    result = suite.run_bench(
        devices=["cpu", "cuda:0"], ops=["matmul"], quick=True, limit=2, max_run_time=0.1
    )
    gpu = [r for r in result.rows if r.device == "cuda:0"]
    matmul = [r for r in gpu if r.op == "matmul"]
    assert matmul and all(not r.projected and r.runs and r.runs >= 5 for r in matmul)
    # with-transfer is timed separately: at these small sizes the copies are within the
    # timing noise of a shared machine, so only its presence is checked, not its order
    assert all(r.seconds_with_transfer and r.seconds_with_transfer > 0 for r in matmul)
    # a speed-up from a CPU time that a busy machine made not credible is withheld
    on_cpu = {(r.size, r.dtype) for r in result.rows if r.device == "cpu"}
    compared = [r for r in matmul if (r.size, r.dtype) in on_cpu]
    assert compared and all(r.speedup_with_transfer is not None or r.doubt for r in compared)
    copies = {(r.op, r.variant) for r in gpu if r.op.startswith("copy")}
    assert copies == {(op, v) for op in ("copy_h2d", "copy_d2h") for v in ("pinned", "pageable")}
    assert all(not b.projected for b in result.break_even)
    assert result.break_even or all(r.doubt for r in compared)
