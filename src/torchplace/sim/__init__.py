"""Simulated GPUs on a machine that has none.

``simulate()`` runs a block of ordinary PyTorch code as if the machine had ``gpus`` GPUs of
the named model: ``torch.cuda`` answers as those GPUs would, tensors on ``cuda:N`` hold no
data and no host memory, CUDA's device rules are enforced with PyTorch's own errors, every
allocation goes through a model of the CUDA caching allocator (out of memory raises
``torch.OutOfMemoryError`` as on the GPU), and every operation is priced by the roofline
cost model. ``torchplace sim script.py`` does the same for a whole script, in a child
process.

Values that would need the GPU's data read as zeros: ``.item()`` is 0, ``bool(t)`` is
False, ``.cpu()`` gives a tensor of zeros; each such read is counted as a device-to-host
synchronisation with its file and line.

Examples:
    >>> import torch, torchplace
    >>> with torchplace.simulate("H100") as report:
    ...     x = torch.randn(1024, 1024, device="cuda")
    ...     y = (x @ x).sum()
    >>> x.device, report.device(0).peak_allocated_bytes >= 4 * 1024 * 1024
    (device(type='cuda', index=0), True)
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch.nn.modules import module as _module
from torch.optim import optimizer as _optimizer

from torchplace import catalog
from torchplace.cost import Peaks, StepEstimate, op_cost
from torchplace.memory import parse_size
from torchplace.sim._cuda_api import patched_torch
from torchplace.sim._modes import SimDispatchMode, SimFunctionMode
from torchplace.sim._state import SimState, is_user_file
from torchplace.sim.report import SCHEMA_VERSION, DeviceReport, SimReport, render

__all__ = ["SCHEMA_VERSION", "DeviceReport", "SimReport", "render", "simulate"]

_SUPPORTED_TORCH = ((2, 6), (2, 14))  # versions tried: see README "Simulator: torch versions"
_active = False


def _check_torch_version() -> None:
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    low, high = _SUPPORTED_TORCH
    if not low <= version <= high:
        raise RuntimeError(
            f"torchplace sim supports torch {low[0]}.{low[1]} to {high[0]}.{high[1]}; this is "
            f"torch {torch.__version__}. The simulator relies on torch's dispatch internals, "
            "which change between releases: install a supported torch or upgrade torchplace."
        )


def _error_record(e: BaseException) -> dict[str, Any]:
    file = line = None
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        if is_user_file(frame.f_code.co_filename):
            file, line = frame.f_code.co_filename, lineno
    return {"type": type(e).__name__, "message": str(e), "file": file, "line": line}


@contextmanager
def simulate(
    gpu: str | catalog.GPUSpec = catalog.DEFAULT_GPU,
    *,
    gpus: int = 1,
    memory: int | str | None = None,
    context_bytes: int | str | None = None,
) -> Iterator[SimReport]:
    """Run the block on ``gpus`` simulated GPUs of model ``gpu``; yield its report.

    Args:
        gpu: a catalog name, matched loosely ("H100", "A100 80GB", "a100-80gb", "T4"),
            or a :class:`torchplace.catalog.GPUSpec`.
        gpus: how many simulated devices (``cuda:0`` ... ``cuda:{gpus-1}``).
        memory: override the capacity each device reports, in bytes or as text
            ("24GB" = 24·10⁹ bytes, "22.5GiB" = 22.5·1024³ bytes).
        context_bytes: override the CUDA context size assumed outside the allocator.

    Yields:
        The :class:`SimReport`, filled in when the block exits (also when it raises).

    Raises:
        ValueError: unknown GPU name, ``gpus`` < 1, or an unparseable size.
        RuntimeError: a simulation is already running, or torch is not a supported version.
    """
    global _active
    spec = gpu if isinstance(gpu, catalog.GPUSpec) else catalog.lookup(gpu)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be a whole number >= 1, got {gpus!r}.")
    capacity = parse_size(memory) if isinstance(memory, str) else memory
    context = parse_size(context_bytes) if isinstance(context_bytes, str) else context_bytes
    if capacity is not None and capacity <= 0:
        raise ValueError(f"memory must be positive, got {memory!r}.")
    _check_torch_version()
    if _active:
        raise RuntimeError("a torchplace simulation is already running; simulations do not nest.")

    # torch imports dynamo lazily (nn.init does); it tabulates torch.cuda's functions on
    # import, so it must see the real ones, not the simulation's.
    import torch._dynamo

    peaks = Peaks.from_spec(spec)
    state = SimState.create(spec, gpus=gpus, capacity=capacity, context_bytes=context, peaks=peaks)
    state.estimates = [StepEstimate(peaks) for _ in range(gpus)]
    step_marks: list[list[float]] = [[0.0] for _ in range(gpus)]

    def on_op(func: Any, args: Any, kwargs: Any, out: Any, label: int) -> None:
        tf32 = torch.backends.cuda.matmul.allow_tf32
        scope = state.scopes[-1] if state.scopes else None
        state.estimates[label].add(op_cost(func, args, kwargs, out, peaks, tf32=tf32), scope)

    dispatch = SimDispatchMode(state, on_op)
    fmode = SimFunctionMode(state, dispatch)
    names: dict[int, str] = {}

    def pre_forward(mod: torch.nn.Module, args: Any) -> None:
        if id(mod) not in names:
            root = type(mod).__name__
            for name, sub in mod.named_modules():
                names.setdefault(id(sub), f"{root}.{name}" if name else root)
                state.modules.add(sub)
        state.scopes.append(names[id(mod)])
        state.phase = "forward"

    def post_forward(mod: torch.nn.Module, args: Any, out: Any) -> None:
        if state.scopes:
            state.scopes.pop()
        if not state.scopes and state.phase == "forward":
            state.phase = "other"

    def on_param(mod: torch.nn.Module, name: str, param: Any) -> None:
        state.modules.add(mod)

    def pre_step(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        state.optimizers.add(opt)
        state.phase = "optimizer"

    def post_step(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        state.phase = "other"
        for marks, est in zip(step_marks, state.estimates, strict=True):
            marks.append(est.seconds)

    report = SimReport(
        gpu={"key": spec.key, "name": spec.name, "torch_name": spec.torch_name},
        torch_version=torch.__version__,
        assumptions=[
            f"{spec.name}: {spec.bandwidth_bytes_per_s / 1e12:.2f} TB/s, dense peaks "
            + ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in spec.peak_flops.items()),
            f"every kernel costs max(FLOPs / peak, bytes / bandwidth) + "
            f"{peaks.launch_seconds * 1e6:.0f} µs launch; host copies at "
            f"{(peaks.host_bandwidth_bytes_per_s or 0) / 1e9:.0f} GB/s per direction",
            "a step is the work between two optimizer.step() calls",
        ],
    )
    _active = True
    try:
        with ExitStack() as stack:
            for handle in (
                _module.register_module_forward_pre_hook(pre_forward),
                _module.register_module_forward_hook(post_forward, always_call=True),
                _module.register_module_parameter_registration_hook(on_param),
                _optimizer.register_optimizer_step_pre_hook(pre_step),
                _optimizer.register_optimizer_step_post_hook(post_step),
            ):
                stack.callback(handle.remove)
            stack.enter_context(patched_torch(state, fmode))
            stack.enter_context(dispatch)
            stack.enter_context(fmode)
            try:
                yield report
            except BaseException as e:
                if not isinstance(e, (SystemExit, KeyboardInterrupt, GeneratorExit)):
                    report.error = _error_record(e)
                raise
    finally:
        _active = False
        report.fill(state, step_marks)


def print_report(report: SimReport, *, file: Any = None) -> None:
    """Print ``report`` as tables to ``file`` (stdout by default)."""
    from rich.console import Console

    out = file or sys.stdout
    width = None if out.isatty() else 120  # pipes and files get whole tables
    render(report, Console(file=out, highlight=False, width=width))
