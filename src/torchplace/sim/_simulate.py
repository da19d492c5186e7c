"""``simulate()``: run a block of PyTorch code on simulated GPUs (see the package docstring)."""

from __future__ import annotations

import importlib
import threading
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch.nn.modules import module as _module
from torch.optim import optimizer as _optimizer

from torchplace import catalog
from torchplace._units import parse_size
from torchplace.cost import Peaks, StepEstimate, op_cost
from torchplace.sim._comm import Topology
from torchplace.sim._cuda_api import patched_torch
from torchplace.sim._distributed import patched_distributed
from torchplace.sim._modes import SimDispatchMode, SimFunctionMode
from torchplace.sim._processes import patched_processes
from torchplace.sim._state import SimState, is_user_file
from torchplace.sim.report import SimReport

__all__ = ["VALUES", "HostMemoryError", "simulate"]

#: What simulated tensors hold: their real data on the host, or no data (placeholders).
VALUES = ("real", "placeholder")

_SUPPORTED_TORCH = ((2, 6), (2, 14))  # versions tried: see README "Simulator: torch versions"
_active = False
_process_ends_with_simulation = False  # set by the command line's child process


def _check_torch_version() -> None:
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    low, high = _SUPPORTED_TORCH
    if not low <= version <= high:
        raise RuntimeError(
            f"torchplace sim supports torch {low[0]}.{low[1]} to {high[0]}.{high[1]}; this is "
            f"torch {torch.__version__}. The simulator relies on torch's dispatch internals, "
            "which change between releases: install a supported torch or upgrade torchplace."
        )


class HostMemoryError(MemoryError):
    """Real values of the simulated GPUs' tensors would not fit in host memory."""


def _host_memory_limit() -> int | None:
    """Half of the host memory available now (Linux: /proc/meminfo), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["MemAvailable"].split()[0]) * 1024 // 2
    except (OSError, KeyError, ValueError):
        return None


def _propagate_to_threads(modes: list[Any]) -> Any:
    """Threads the script starts see the simulation too (torch modes are per thread)."""
    real = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def bootstrap(thread: threading.Thread) -> None:
        if not _active:
            return real(thread)
        with ExitStack() as stack:
            for mode in modes:
                stack.enter_context(mode)
            return real(thread)

    threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]
    return lambda: setattr(threading.Thread, "_bootstrap_inner", real)


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
    values: str = "real",
    host_memory_limit: int | str | None = None,
    write_files: bool = False,
    nodes: int = 1,
    network: str | None = None,
) -> Iterator[SimReport]:
    """Run the block on ``gpus`` simulated GPUs of model ``gpu``; yield its report.

    Args:
        gpu: a catalog name, matched loosely ("H100", "A100 80GB", "a100-80gb", "T4"),
            or a :class:`torchplace.catalog.GPUSpec`.
        gpus: how many simulated devices (``cuda:0`` ... ``cuda:{gpus-1}``).
        memory: override the capacity each device reports, in bytes or as text
            ("24GB" = 24·10⁹ bytes, "22.5GiB" = 22.5·1024³ bytes).
        context_bytes: override the CUDA context size assumed outside the allocator.
        values: ``"real"``: simulated tensors hold real values, computed on the CPU;
            ``"placeholder"``: they hold no data (for models larger than host memory).
        host_memory_limit: with real values, the most host memory the simulated GPUs'
            tensors may take (bytes or text); default: half the memory available now.
            Going past it raises :class:`HostMemoryError`.
        write_files: let every ``torch.save`` of simulated tensors write where the script
            says. By default a file goes there only when it holds real values and replaces
            no file the run did not create; otherwise it goes to a scratch folder the
            report names (docs/sim.md, "Files the script saves").

    Yields:
        The :class:`SimReport`, filled in when the block exits (also when it raises).

    Raises:
        ValueError: unknown GPU name, ``gpus`` < 1, an unknown ``values``, or an
            unparseable size.
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
    if values not in VALUES:
        raise ValueError(
            f"values must be one of {', '.join(map(repr, VALUES))}, got {values!r}: 'real' "
            "computes every value on the CPU, 'placeholder' keeps shapes only."
        )
    limit = (
        parse_size(host_memory_limit)
        if isinstance(host_memory_limit, str)
        else host_memory_limit or _host_memory_limit()
    )
    _check_torch_version()
    if _active:
        raise RuntimeError("a torchplace simulation is already running; simulations do not nest.")

    # torch imports dynamo lazily (torch.optim does); it keeps references to torch.cuda's
    # functions, which must be the real ones once the simulation is over. A process that
    # ends with the simulation (the command line's child) need not pay for the import.
    if not _process_ends_with_simulation:
        importlib.import_module("torch._dynamo")

    peaks = Peaks.from_spec(spec)
    state = SimState.create(
        spec, gpus=gpus, capacity=capacity, context_bytes=context, peaks=peaks,
        real=values == "real", host_limit=limit if values == "real" else None,
    )  # fmt: skip
    for d in state.physical:
        d.estimate = StepEstimate(peaks)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be a whole number >= 1, got {nodes!r}.")
    net = catalog.network(network) if network else catalog.network()
    state.topology = Topology(nodes, gpus, float(net.bandwidth_bytes_per_s))

    def on_op(
        func: Any, args: Any, kwargs: Any, out: Any, label: int, inputs: Any, outputs: Any
    ) -> None:
        tf32 = torch._C._get_cublas_allow_tf32()  # torch.backends.cuda.matmul.allow_tf32
        scope = state.scopes[-1] if state.scopes else None
        estimate = state.devices[label].estimate
        assert estimate is not None  # set for every device above
        cost = op_cost(func, args, kwargs, out, peaks, tf32=tf32, inputs=inputs, outputs=outputs)
        estimate.add(cost, scope)
        if cost.bound != "none":
            state.trace.op(label, cost.flops, cost.bytes, cost.precision)

    dispatch = SimDispatchMode(state, on_op)
    fmode = SimFunctionMode(state, dispatch)
    names: dict[int, str] = {}

    def pre_forward(mod: torch.nn.Module, args: Any) -> None:
        if id(mod) not in names:
            root = type(mod).__name__
            for name, sub in mod.named_modules():
                names.setdefault(id(sub), f"{root}.{name}" if name else root)
                state.modules.add(sub)
        # (its _parameters, not parameters(recurse=False): a generator of five Python calls
        # a parameter, in every module's every forward)
        state.classify([p for p in mod._parameters.values() if p is not None], "parameters")
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
        params = [p for group in opt.param_groups for p in group["params"]]
        state.classify(params, "parameters")
        state.classify([p.grad for p in params if p.grad is not None], "gradients")

    def post_step(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        state.phase = "other"
        state.classify_state(opt)
        state.trace.step(state.clock(state.current) if state.devices else 0.0)
        for d in state.devices:
            d.step_marks.append(d.estimate.seconds if d.estimate else 0.0)

    report = SimReport(
        gpu={"key": spec.key, "name": spec.name, "torch_name": spec.torch_name},
        torch_version=torch.__version__,
        values=values,
        assumptions=[
            f"{spec.torch_name}: {spec.bandwidth_bytes_per_s / 1e12:.2f} TB/s, dense peaks "
            + ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in spec.peak_flops.items()),
            f"every kernel costs max(FLOPs / peak, bytes / bandwidth) + "
            f"{peaks.launch_seconds * 1e6:.0f} µs launch; host copies at "
            f"{(peaks.host_bandwidth_bytes_per_s or 0) / 1e9:.0f} GB/s per direction",
            "a step is the work between two optimizer.step() calls",
            "times the script measures itself with time.time() or perf_counter() are this "
            "CPU's, not the GPU's; torch.cuda.Event.elapsed_time returns the estimate",
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
            stack.enter_context(patched_torch(state, fmode, write_files=write_files))
            stack.enter_context(patched_distributed(state, fmode))
            options = {
                "gpu": spec.key,
                "gpus": gpus,
                "memory": capacity,
                "context_bytes": context,
                "values": values,
                "host_memory_limit": limit,
                "write_files": write_files,
                "nodes": nodes,
                "network": network,
            }
            processes = stack.enter_context(patched_processes(state, options))
            stack.callback(lambda: setattr(report, "processes", processes.collect()))
            stack.enter_context(dispatch)
            stack.enter_context(fmode)
            stack.callback(_propagate_to_threads([dispatch, fmode]))
            try:
                yield report
            except BaseException as e:
                if not isinstance(e, (SystemExit, KeyboardInterrupt, GeneratorExit)):
                    report.error = _error_record(e)
                raise
    finally:
        _active = False
        state.finish_trace()
        report.fill(state)
