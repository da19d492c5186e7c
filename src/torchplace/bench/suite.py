"""Run the benchmark: measure the CPU and every accelerator, project catalog GPUs.

For each device and operation (see :mod:`torchplace.bench.workloads`) every size of the
sweep is timed with :func:`torchplace.bench.timing.measure` and compared with the
device's peak; on an accelerator the same operation is also timed end to end from CPU
tensors (copy in, compute, copy back), and host↔device copies are timed from pinned and
pageable memory. GPUs named with ``gpus`` are *projected* by the cost model from their
catalog row, transfers over their host link included. Sizes that would not fit, and
dtypes a device lacks, are skipped with a note.

Examples:
    >>> from torchplace.bench.suite import run_bench
    >>> result = run_bench(devices=["cpu"], ops=["elementwise"], quick=True, limit=1,
    ...                    max_run_time=0.05, measure_peaks=False)
    >>> [(r.op, r.device, r.projected) for r in result.rows]
    [('elementwise', 'cpu', False)]
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Literal

import torch

from torchplace.bench import credibility, machine
from torchplace.bench.breakeven import attach_speedups, break_even
from torchplace.bench.peaks import catalog_peaks, measure_cpu_peaks
from torchplace.bench.results import BenchResult, Row
from torchplace.bench.timing import Timing, measure
from torchplace.bench.workloads import OPS, PRECISIONS, Workload, dtype_of, sizes
from torchplace.cost import GPU_LAUNCH_SECONDS, Peaks, StepEstimate, estimate, transfer_seconds

__all__ = ["ProgressFn", "run_bench"]

#: ``progress(description, done, total)``, called before each step.
ProgressFn = Callable[[str, int, int], None]

Direction = Literal["h2d", "d2h"]
_DIRECTIONS: tuple[Direction, ...] = ("h2d", "d2h")
_CPU = torch.device("cpu")
_META = torch.device("meta")
# Shares of the free memory a measurement may take: RAM keeps half free so the machine
# never swaps (other processes live there too); a GPU's free memory is its own.
_RAM_SHARE, _DEVICE_SHARE = 0.5, 0.9
# Only flops/bytes are read from estimates made with these: any positive peaks count the same.
_COUNTING = Peaks("counting", flops_per_s={"fp32": 1.0}, bandwidth_bytes_per_s=1.0)


class _HintedValueError(ValueError):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _gib(n: float) -> str:
    return f"{n / 1024**3:.3g} GiB"


def _size_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def _split(values: Sequence[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _resolve_devices(specs: Sequence[str] | None) -> list[torch.device]:
    present = machine.accelerators()
    if not specs:
        return [_CPU, *present]
    chosen: list[torch.device] = []
    for spec in _split(specs):
        try:
            dev = torch.device(spec)
        except RuntimeError as e:
            raise ValueError(
                f"--device {spec!r} is not a device torch understands ({e}); "
                "use e.g. 'cpu', 'cuda', 'cuda:1'."
            ) from e
        if dev.type == "cpu":
            matches = [_CPU]
        else:
            matches = [d for d in present if d.type == dev.type and dev.index in (None, d.index)]
        if not matches:
            have = ", ".join(["cpu", *map(str, present)])
            raise _HintedValueError(
                f"--device {spec}: this machine has no such device; it has {have}.",
                "to see how a GPU you do not have would do, project it from the catalog "
                "with --gpu NAME (e.g. --gpu H100).",
            )
        chosen += [d for d in matches if d not in chosen]
    return chosen


def _note(result: BenchResult, text: str) -> None:
    if text not in result.notes:
        result.notes.append(text)


def _uses_tf32(device: torch.device, op: str, precision: str) -> bool:
    if precision == "tf32":
        return True
    # cuDNN convolutions in float32 use TF32 by default (torch.backends.cudnn.allow_tf32).
    return op == "conv2d" and device.type == "cuda" and bool(torch.backends.cudnn.allow_tf32)


@contextlib.contextmanager
def _matmul_precision(device: torch.device, tf32: bool) -> Iterator[None]:
    if device.type != "cuda":
        yield
        return
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def _fraction(w: Workload, seconds: float, est: StepEstimate, peaks: Peaks, tf32: bool) -> float:
    if w.compute_bound:
        return est.flops / seconds / peaks.flops_for(w.dtype, tf32=tf32)
    return est.bytes / seconds / peaks.bandwidth_bytes_per_s


def _unsupported(
    result: BenchResult, device: torch.device, w: Workload, precision: str
) -> str | None:
    peaks = result.peaks.get("cpu")
    slow_kind = device.type == "cpu" and w.compute_bound and precision in ("bf16", "fp16")
    if slow_kind and peaks is not None:
        rate, fp32 = peaks.flops_per_s[precision] / 1e9, peaks.flops_per_s["fp32"] / 1e9
        if rate < fp32 / 4:
            return (
                f"it runs at {rate:.3g} GFLOP/s against {fp32:.3g} in fp32 on this CPU "
                f"(no native {precision} kernel), too slow to sweep"
            )
    return machine.lacks(device, precision)


def _too_big(device: torch.device, w: Workload) -> str | None:
    free = machine.free_bytes(device)
    share = _RAM_SHARE if device.type == "cpu" else _DEVICE_SHARE
    if free is not None and w.memory_bytes > share * free:
        why = " (half is kept free so the machine does not swap)" if device.type == "cpu" else ""
        return f"needs {_gib(w.memory_bytes)}, {_gib(free)} available{why}"
    host_free = machine.free_bytes(_CPU)
    transfer = w.input_bytes + w.output_bytes
    if device.type != "cpu" and host_free is not None and transfer > _RAM_SHARE * host_free:
        return f"its CPU copies need {_gib(transfer)}, {_gib(host_free)} of RAM available"
    return None


def _skip_text(device: object, w: Workload, precision: str, reason: str) -> str:
    return f"skipped {w.op} {precision} {w.label} on {device}: {reason}."


def _time_on(device: torch.device, w: Workload, budget: float) -> Timing:
    inputs = w.inputs(device)
    return measure(lambda: w(*inputs), device=device, max_run_time=budget)


def _measure_op(
    result: BenchResult, device: torch.device, w: Workload, precision: str, budget: float
) -> None:
    unsupported = _unsupported(result, device, w, precision)
    if unsupported:
        _note(result, f"skipped {precision} {w.op} on {device}: {unsupported}.")
        return
    too_big = _too_big(device, w)
    if too_big:
        _note(result, _skip_text(device, w, precision, too_big))
        return
    tf32 = _uses_tf32(device, w.op, precision)
    with_transfer = None
    try:
        with _matmul_precision(device, tf32):
            t = _time_on(device, w, budget)  # the inputs are freed when it returns
            if device.type != "cpu":
                host = w.inputs(_CPU)
                end_to_end = measure(
                    lambda: w(*(x.to(device) for x in host)).to(_CPU),
                    device=device,
                    max_run_time=budget,
                )
                with_transfer = end_to_end.median
    except torch.OutOfMemoryError:
        _note(result, _skip_text(device, w, precision, "ran out of memory"))
        return
    except (RuntimeError, NotImplementedError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        _note(result, _skip_text(device, w, precision, f"torch says: {first}"))
        return
    peaks = result.peaks.get(str(device))
    est = estimate(w, *w.inputs(_META), peaks=peaks or _COUNTING, tf32=tf32)
    result.rows.append(
        Row(
            op=w.op,
            size=w.size,
            label=w.label,
            dtype="fp32" if precision == "tf32" else precision,
            tf32=tf32,
            variant=None,
            device=str(device),
            device_name=machine.device_name(device),
            projected=False,
            seconds=t.median,
            iqr_seconds=t.iqr,
            runs=t.runs,
            flops=est.flops,
            bytes=est.bytes,
            metric="flops" if w.compute_bound else "bytes",
            peak_fraction=None if peaks is None else _fraction(w, t.median, est, peaks, tf32),
            peak_source=None if peaks is None else ("measured" if peaks.measured else "catalog"),
            bound=None if peaks is None else est.total.bound,
            predicted_seconds=None if peaks is None else est.seconds,
            seconds_with_transfer=with_transfer,
        )
    )


def _measure_copy(
    result: BenchResult,
    device: torch.device,
    nbytes: int,
    direction: Direction,
    pinned: bool,
    budget: float,
) -> None:
    variant = "pinned" if pinned else "pageable"
    what = f"{variant} {direction} copy of {_size_bytes(nbytes)} on {device}"
    free, host_free = machine.free_bytes(device), machine.free_bytes(_CPU)
    if (free is not None and nbytes > _DEVICE_SHARE * free) or (
        host_free is not None and nbytes > _RAM_SHARE * host_free
    ):
        _note(result, f"skipped {what}: not enough free memory.")
        return
    try:
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
        dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
        if direction == "h2d":
            t = measure(
                lambda: dev.copy_(host, non_blocking=pinned), device=device, max_run_time=budget
            )
        else:
            t = measure(
                lambda: host.copy_(dev, non_blocking=pinned), device=device, max_run_time=budget
            )
    except RuntimeError as e:
        _note(result, f"skipped {what}: torch says: {str(e).strip().splitlines()[0]}.")
        return
    peaks = result.peaks.get(str(device))
    link = None if peaks is None else peaks.host_bandwidth_bytes_per_s
    result.rows.append(
        Row(
            op=f"copy_{direction}",
            size=nbytes,
            label=_size_bytes(nbytes),
            dtype=None,
            tf32=False,
            variant=variant,
            device=str(device),
            device_name=machine.device_name(device),
            projected=False,
            seconds=t.median,
            iqr_seconds=t.iqr,
            runs=t.runs,
            flops=0.0,
            bytes=nbytes,
            metric="bytes",
            peak_fraction=None if not link else nbytes / t.median / link,
            peak_source=None if not link else "catalog",
            bound=None,
            predicted_seconds=None
            if peaks is None or not link
            else (transfer_seconds(nbytes, peaks, direction)),
        )
    )


def _project(
    result: BenchResult, key: str, peaks: Peaks, ops: Sequence[str], quick: bool, limit: int | None
) -> None:
    result.peaks[key] = peaks
    for op in ops:
        for precision in PRECISIONS[op]:
            if precision != "fp32" and precision not in peaks.flops_per_s:
                if precision != "tf32":
                    _note(
                        result,
                        f"{peaks.name}: the catalog has no {precision} peak, so no "
                        f"{precision} rows are projected.",
                    )
                continue
            tf32 = precision == "tf32" or (op == "conv2d" and "tf32" in peaks.flops_per_s)
            for size in sizes(op, quick=quick, limit=limit):
                w = Workload(op, size, dtype_of(precision))
                if peaks.memory_bytes is not None and w.memory_bytes > peaks.memory_bytes:
                    _note(
                        result,
                        _skip_text(
                            peaks.name,
                            w,
                            precision,
                            f"needs {_gib(w.memory_bytes)}, it has {_gib(peaks.memory_bytes)}",
                        ),
                    )
                    continue
                est = estimate(w, *w.inputs(_META), peaks=peaks, tf32=tf32)
                transfer = None
                if peaks.host_bandwidth_bytes_per_s:
                    transfer = transfer_seconds(w.input_bytes, peaks, "h2d") + transfer_seconds(
                        w.output_bytes, peaks, "d2h"
                    )
                result.rows.append(
                    Row(
                        op=op,
                        size=size,
                        label=w.label,
                        dtype="fp32" if precision == "tf32" else precision,
                        tf32=tf32,
                        variant=None,
                        device=key,
                        device_name=peaks.name,
                        projected=True,
                        seconds=est.repeated_seconds,  # timed in a loop, as measured rows
                        iqr_seconds=None,
                        runs=None,
                        flops=est.flops,
                        bytes=est.bytes,
                        metric="flops" if w.compute_bound else "bytes",
                        peak_fraction=_fraction(w, est.repeated_seconds, est, peaks, tf32),
                        peak_source="catalog",
                        bound="host" if est.host_seconds > est.gpu_seconds else est.total.bound,
                        predicted_seconds=est.repeated_seconds,
                        seconds_with_transfer=(
                            None if transfer is None else est.repeated_seconds + transfer
                        ),
                    )
                )
    link = peaks.host_bandwidth_bytes_per_s
    if not link:
        _note(
            result,
            f"{peaks.name}: the catalog has no host link bandwidth; transfers are not projected.",
        )
        return
    for nbytes in sizes("copy", quick=quick, limit=limit):
        for direction in _DIRECTIONS:
            seconds = transfer_seconds(nbytes, peaks, direction)
            result.rows.append(
                Row(
                    op=f"copy_{direction}",
                    size=nbytes,
                    label=_size_bytes(nbytes),
                    dtype=None,
                    tf32=False,
                    variant="pinned",
                    device=key,
                    device_name=peaks.name,
                    projected=True,
                    seconds=seconds,
                    iqr_seconds=None,
                    runs=None,
                    flops=0.0,
                    bytes=nbytes,
                    metric="bytes",
                    peak_fraction=nbytes / seconds / link,
                    peak_source="catalog",
                    bound="launch" if peaks.launch_seconds > nbytes / link else "memory",
                    predicted_seconds=seconds,
                )
            )


def _set_cpu_peaks(result: BenchResult, quick: bool) -> None:
    result.peaks["cpu"] = measure_cpu_peaks(quick=quick)


def run_bench(
    *,
    devices: Sequence[str] | None = None,
    gpus: Sequence[str] = (),
    ops: Sequence[str] = OPS,
    quick: bool = False,
    limit: int | None = None,
    max_run_time: float | None = None,
    measure_peaks: bool = True,
    progress: ProgressFn | None = None,
) -> BenchResult:
    """Measure ``devices`` and project ``gpus``; see the module docstring.

    Args:
        devices: devices to measure (``"cpu"``, ``"cuda"``, ``"cuda:1"``, comma lists
            allowed); by default the CPU and every accelerator present.
        gpus: catalog names of GPUs to project with the cost model (comma lists
            allowed), e.g. ``["H100", "A100 80GB"]``.
        ops: operations among ``elementwise``, ``matmul``, ``conv2d``.
        quick: the short sweep and short timings (under 30 s on a 2-core CPU).
        limit: keep only the first ``limit`` sizes of each sweep.
        max_run_time: seconds of timed runs per measurement at most (0.2 with
            ``quick``, 1.0 otherwise).
        measure_peaks: measure the CPU's peaks (needed for its fraction of peak).
        progress: called before each step with a description, steps done, steps in all.

    Returns:
        The :class:`~torchplace.bench.results.BenchResult`.

    Raises:
        ValueError: an unknown operation, device or GPU name (the catalog's error, which
            lists the names it knows).
    """
    unknown = [op for op in _split(ops) if op not in OPS]
    if unknown:
        raise ValueError(f"unknown operation(s) {unknown}; choose from {', '.join(OPS)}.")
    op_list = [op for op in OPS if op in _split(ops)]
    chosen = _resolve_devices(devices)
    projected = _lookup_gpus(_split(gpus))
    budget = max_run_time if max_run_time is not None else (0.2 if quick else 1.0)
    result = BenchResult(machine=machine.describe(chosen), quick=quick)
    load, cores = machine.load_average(), os.cpu_count() or 1
    if load is not None and load > 0.5 * cores:
        _note(
            result,
            f"This machine was busy when the run started (load average {load:.2f} over the "
            f"last minute on {cores} cores): other processes compete for the CPU, so CPU "
            "times are noisier and slower than this CPU can do.",
        )

    steps: list[tuple[str, Callable[[], None]]] = []
    if _CPU in chosen and measure_peaks:
        steps.append(("measuring the CPU's peaks", partial(_set_cpu_peaks, result, quick)))
    for dev in chosen:
        if dev.type != "cpu":
            peaks = catalog_peaks(machine.device_name(dev))
            if peaks is None:
                _note(
                    result,
                    f"{machine.device_name(dev)} ({dev}) is not in the catalog: its "
                    "fraction of peak is not shown.",
                )
            else:
                result.peaks[str(dev)] = peaks
        for op in op_list:
            for precision in PRECISIONS[op]:
                if precision == "tf32" and dev.type != "cuda":
                    continue
                for size in sizes(op, quick=quick, limit=limit):
                    w = Workload(op, size, dtype_of(precision))
                    steps.append(
                        (
                            f"{dev} · {op} {precision} · {w.label}",
                            partial(_measure_op, result, dev, w, precision, budget),
                        )
                    )
        if dev.type != "cpu":
            for nbytes in sizes("copy", quick=quick, limit=limit):
                for direction in _DIRECTIONS:
                    for pinned in (True, False):
                        steps.append(
                            (
                                f"{dev} · copy {direction} · {_size_bytes(nbytes)}",
                                partial(
                                    _measure_copy, result, dev, nbytes, direction, pinned, budget
                                ),
                            )
                        )
    for key, peaks in projected:
        steps.append(
            (
                f"projecting {peaks.name}",
                partial(_project, result, key, peaks, op_list, quick, limit),
            )
        )

    for done, (description, step) in enumerate(steps):
        if progress is not None:
            progress(description, done, len(steps))
        step()
    if progress is not None:
        progress("done", len(steps), len(steps))

    attach_speedups(result.rows)
    credibility.mark(result.rows)  # before break-even: no crossing drawn from noise
    result.break_even = break_even(result.rows)
    _explain(result, chosen, bool(projected))
    return result


def _lookup_gpus(names: list[str]) -> list[tuple[str, Peaks]]:
    from torchplace import catalog

    out: list[tuple[str, Peaks]] = []
    for name in names:
        spec = catalog.lookup(name)
        if spec.key not in [k for k, _ in out]:
            out.append((spec.key, Peaks.from_spec(spec)))
    return out


def _explain(result: BenchResult, chosen: list[torch.device], projected: bool) -> None:
    cpu = result.peaks.get("cpu")
    if cpu is not None:
        f = cpu.flops_per_s
        _note(
            result,
            f"CPU peaks are measured, not from a datasheet ({cpu.source}): "
            f"{f['fp32'] / 1e9:.3g} GFLOP/s fp32, {f['bf16'] / 1e9:.3g} GFLOP/s bf16, "
            f"{cpu.bandwidth_bytes_per_s / 1e9:.3g} GB/s memory, "
            f"{cpu.launch_seconds * 1e6:.3g} µs per operation.",
        )
    if any(d.type != "cpu" for d in chosen):
        _note(
            result,
            "Accelerator speed-ups 'with transfer' are measured end to end from CPU tensors: "
            "inputs copied with .to() from pageable memory, the result copied back.",
        )
    if projected:
        _note(
            result,
            "Projected rows are estimates, not measurements: the cost model's roofline "
            "max(FLOPs / peak, bytes / bandwidth) + "
            f"{GPU_LAUNCH_SECONDS * 1e6:g} µs per kernel with the catalog's datasheet peaks; "
            "real kernels reach less than the peak, so real times are longer. Projected "
            "transfers run at the host link's peak per direction (pinned memory).",
        )
    if _CPU not in chosen:
        _note(result, "The CPU was not measured, so there are no speed-ups or break-even sizes.")
