"""Published measurements, GPU profiles, and the model's predictions of both.

- :func:`load_published` reads ``benchmarks/timing/published.csv``: one row per published
  measurement (workload, GPU, precision, batch, the number and its unit, the software, the
  source, and whether it is in the *fit* or the *holdout* split, fixed before fitting).
- :func:`load_profile` reads the per-kernel JSON that ``benchmarks/timing/profile_gpu.py``
  writes on a real GPU (``benchmarks/results/``): measured step times and kernel times
  that calibrate and check the model as published numbers do.
- :func:`record` runs a row's workload once under ``torchplace.simulate`` on the row's GPU
  (placeholder values: shapes only) and keeps the timed steps' operations (kernel
  signature, host time, kind); :func:`predict` prices such a recording with the model's
  constants, so a fit tries constants without simulating again.

Examples:
    >>> from benchmarks.timing.calibration import load_published
    >>> rows = load_published()
    >>> sorted({r.split for r in rows})
    ['fit', 'holdout']
    >>> row = next(r for r in rows if r.id == "dle-r50-train-a100-amp")
    >>> round(row.measured_seconds, 4)  # 256 images at 2470 images/s
    0.1036
"""

from __future__ import annotations

import csv
import json
import pathlib
from dataclasses import dataclass, field
from typing import Any

from benchmarks.timing.workloads import Run, build

__all__ = [
    "PROFILE_SCHEMA",
    "Prediction",
    "Recording",
    "Row",
    "load_profile",
    "load_published",
    "predict",
    "record",
    "roofline",
]

HERE = pathlib.Path(__file__).parent
PUBLISHED = HERE / "published.csv"
#: the ``schema`` value of profile_gpu.py's JSON files
PROFILE_SCHEMA = "torchplace-timing-profile/1"
_COLUMNS = ("id", "split", "workload", "gpu", "precision", "batch", "options", "metric", "value",
            "software", "source", "notes")  # fmt: skip
_WARMUP, _TIMED = 2, 2


@dataclass(frozen=True)
class Row:
    """One published measurement."""

    id: str
    split: str
    workload: str
    gpu: str
    precision: str
    batch: int
    options: dict[str, str]
    metric: str
    value: float
    software: str
    source: str
    notes: str = ""

    @property
    def run(self) -> Run:
        return Run(self.workload, self.precision, self.batch, dict(self.options))

    @property
    def compiled(self) -> bool:
        return self.options.get("compiled") == "1"

    @property
    def measured_seconds(self) -> float:
        """The measured time of one step (one call of the workload's step function)."""
        if self.metric in ("img/s", "seq/s"):
            return self.batch / self.value
        if self.metric == "tok/s":
            return 1.0 / self.value
        if self.metric == "ms/step":
            return self.value / 1e3
        if self.metric == "mfu":  # nanoGPT's estimate_mfu, against the A100's 312 TFLOP/s
            return _nanogpt_flops(self) / (self.value * 312e12)
        raise ValueError(f"{self.id}: unknown metric {self.metric!r}")


def _nanogpt_flops(row: Row) -> float:
    """FLOPs of one nanoGPT iteration as its ``estimate_mfu`` counts them: per token
    ``6 N + 12 L H Q T`` (N the parameters without the position embedding)."""
    layers, heads, dim, seq, vocab = 12, 12, 768, int(row.options.get("seq", "1024")), 50304
    n = vocab * dim + layers * (12 * dim * dim + 2 * dim) + dim  # no biases (bias=False)
    per_token = 6 * n + 12 * layers * heads * (dim // heads) * seq
    return per_token * seq * row.batch * int(row.options.get("accumulate", "1"))


def _options(text: str) -> dict[str, str]:
    pairs = [p.split("=", 1) for p in text.split(";") if p.strip()]
    bad = [p for p in pairs if len(p) != 2]
    if bad:
        raise ValueError(f"options must be key=value;key=value, got {text!r}.")
    return {k.strip(): v.strip() for k, v in pairs}


def load_published(path: pathlib.Path = PUBLISHED) -> list[Row]:
    """The published measurements, validated.

    Raises:
        ValueError: a missing column, an unknown split or GPU, a bad number.
    """
    from torchplace import catalog

    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != _COLUMNS:
            raise ValueError(f"{path}: columns must be {_COLUMNS}, got {reader.fieldnames}.")
        rows = []
        for line in reader:
            where = f"{path}: row {line['id']!r}"
            if line["split"] not in ("fit", "holdout"):
                raise ValueError(f"{where}: split must be fit or holdout, got {line['split']!r}.")
            catalog.lookup(line["gpu"])
            if not line["source"].strip():
                raise ValueError(f"{where} has no source.")
            row = Row(
                id=line["id"], split=line["split"], workload=line["workload"], gpu=line["gpu"],
                precision=line["precision"], batch=int(line["batch"]),
                options=_options(line["options"]), metric=line["metric"],
                value=float(line["value"]), software=line["software"], source=line["source"],
                notes=line["notes"] or "",
            )  # fmt: skip
            if not row.value > 0 or row.batch < 1:
                raise ValueError(f"{where}: value and batch must be positive.")
            row.measured_seconds  # noqa: B018 - the metric is known
            rows.append(row)
    ids = [r.id for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: ids repeat.")
    return rows


@dataclass
class Recording:
    """The timed steps of one simulated run: their operations, and where each step
    begins (indices into ``ops``)."""

    gpu: str
    ops: list[Any]
    starts: list[int]
    compiled: bool = False
    notes: list[str] = field(default_factory=list)


def record(row: Row, *, gpu: str | None = None) -> Recording:
    """Simulate ``row``'s workload on its GPU (or ``gpu``), two warm-up steps then two
    timed ones, and keep the timed steps' operations."""
    import torch

    import torchplace
    from torchplace.sim.accounting._trace import OP_KINDS
    from torchplace.timemodel.replay import Op

    key = gpu or row.gpu
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    starts: list[int] = []
    try:
        # the capacity is made large: only the time is wanted, and the measured batch fit
        with torchplace.simulate(key, values="placeholder", memory="4TB") as report:
            step = build(row.run)
            for _ in range(_WARMUP):
                step()
            torch.cuda.synchronize()
            trace = _running_state().trace
            for _ in range(_TIMED):
                starts.append(len(trace.op_seq))
                step()
            torch.cuda.synchronize()
            end = len(trace.op_seq)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = flags[0]
        torch.set_float32_matmul_precision(flags[1])
    if report.error:
        raise RuntimeError(f"{row.id}: the simulation failed: {report.error}")
    ops, index = [], {}
    for i in range(starts[0], end):
        if trace.op_device[i] != 0:
            continue
        index[i] = len(ops)
        sig = trace.op_signature[i]
        ops.append(Op(OP_KINDS[trace.op_kind[i]], trace.signatures[sig] if sig >= 0 else None,
                      trace.op_host[i], trace.op_bytes[i], trace.op_flops[i]))  # fmt: skip
    base = starts[0]
    return Recording(key, ops, [s - base for s in starts], row.compiled,
                     [n["text"] for n in report.notes])  # fmt: skip


def _running_state() -> Any:
    """The state of the simulation running now (its dispatch mode holds it)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from torchplace.sim.emulation._modes import SimDispatchMode

    for mode in _get_current_dispatch_mode_stack():
        if isinstance(mode, SimDispatchMode):
            return mode.state
    raise RuntimeError("no torchplace simulation is running")


@dataclass(frozen=True)
class Prediction:
    """The model's step time for a recording, and what bounds it."""

    seconds: float
    bound: str
    gpu_seconds: float
    host_seconds: float


def predict(recording: Recording, params: Any = None) -> Prediction:
    """Price a recording with the model's constants (``params``: a
    :class:`torchplace.timemodel.Params`; the shipped ones by default)."""
    from torchplace import catalog
    from torchplace.timemodel import DeviceModel
    from torchplace.timemodel.replay import Link, replay
    from torchplace.timemodel.step import summarize

    spec = catalog.lookup(recording.gpu)
    model = DeviceModel.from_spec(spec, params)
    link = Link(host=float(spec.host_bandwidth_bytes_per_s))
    # compiled with CUDA graphs (mode="reduce-overhead"): the host issues no operation
    result = replay(recording.ops, model, link, host_scale=0.0 if recording.compiled else 1.0,
                    marks=recording.starts[1:])  # fmt: skip
    marks = [(*m, 0, 0) for m in result.marks]
    s = summarize(marks, [], result.estimate.total.seconds_by_bound, model.params)
    return Prediction(s["step_seconds"], s["bound"], s["gpu_seconds"], s["host_seconds"])


def roofline(recording: Recording) -> float:
    """The previous release's estimate of the same step, for comparison: every kernel
    ``max(FLOPs / datasheet peak, bytes / datasheet bandwidth) + 5 µs``, summed."""
    from torchplace import catalog

    spec = catalog.lookup(recording.gpu)
    flops = dict(spec.peak_flops)
    total = 0.0
    for op in recording.ops:
        if op.kind == "sync":
            continue
        if op.kind in ("h2d", "d2h"):
            total += op.nbytes / spec.host_bandwidth_bytes_per_s + 5e-6
            continue
        peak = flops.get(op.kind, flops["fp32"])
        total += max(op.flops / peak, op.nbytes / spec.bandwidth_bytes_per_s) + 5e-6
    return total / len(recording.starts)


def load_profile(path: pathlib.Path) -> dict[str, Any]:
    """A profile written by ``benchmarks/timing/profile_gpu.py``, validated.

    Its form: ``{"schema": PROFILE_SCHEMA, "device": {...}, "torch": ..., "cases":
    [{"id", "workload", "precision", "batch", "options", "step_seconds", "kernels":
    [{"name", "calls", "cuda_seconds"}]}]}``.

    Raises:
        ValueError: not such a profile (the message says what is wrong).
    """
    try:
        data = json.loads(pathlib.Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not a readable JSON profile: {e}") from e
    if not isinstance(data, dict) or data.get("schema") != PROFILE_SCHEMA:
        raise ValueError(f"{path}: not a timing profile (schema must be {PROFILE_SCHEMA!r}).")
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise ValueError(f"{path}: 'cases' must be a list.")
    for case in cases:
        missing = {"id", "workload", "precision", "batch", "step_seconds", "kernels"} - set(case)
        if missing:
            raise ValueError(f"{path}: case {case.get('id', '?')!r} lacks {sorted(missing)}.")
        if not (isinstance(case["step_seconds"], (int, float)) and case["step_seconds"] > 0):
            raise ValueError(f"{path}: case {case['id']!r}: step_seconds must be positive.")
        for k in case["kernels"]:
            if not {"name", "calls", "cuda_seconds"} <= set(k):
                raise ValueError(
                    f"{path}: case {case['id']!r}: a kernel lacks name/calls/cuda_seconds."
                )
    return data
