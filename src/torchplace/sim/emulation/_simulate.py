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
from torchplace.sim.accounting._comm import Topology
from torchplace.sim.accounting._hostmem import HostMemoryError, host_memory
from torchplace.sim.accounting._state import SimState, is_user_file
from torchplace.sim.emulation._cuda_api import cublas_allows_tf32, patched_torch
from torchplace.sim.emulation._distributed import patched_distributed
from torchplace.sim.emulation._modes import SimDispatchMode, SimFunctionMode
from torchplace.sim.emulation._processes import patched_processes
from torchplace.sim.report import SimReport
from torchplace.timemodel.host import op_host_seconds

__all__ = ["VALUES", "HostMemoryError", "simulate"]

#: What simulated tensors hold: their real data on the host, or no data (placeholders); or
#: real data until the host runs short, then placeholders ("auto").
VALUES = ("real", "placeholder", "auto")

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


def _host_memory_limit() -> int | None:
    """Half of the host memory available now (Linux: /proc/meminfo), or None if unknown."""
    available, _ = host_memory()
    return None if available is None else available // 2


def _values_decision(requested: str, state: SimState) -> dict[str, Any]:
    """Which values the run held and why (the report's ``values_decision``), and the most
    host memory real values took, or would have taken (``real_peak_bytes``)."""
    decision = _decision(requested, state)
    decision["real_peak_bytes"] = state.host_peak
    return decision


def _decision(requested: str, state: SimState) -> dict[str, Any]:
    from torchplace._units import format_bytes

    switched = state.switched
    if switched is not None:
        where = {"file": switched["file"], "line": switched["line"]}
        return {"requested": requested, "ran": "placeholder", "reason": switched["reason"],
                "placeholder_from": where}  # fmt: skip
    if requested == "placeholder":
        reason = "asked for (values='placeholder'): shapes only, any model size"
        return {"requested": requested, "ran": "placeholder", "reason": reason,
                "placeholder_from": None}  # fmt: skip
    limit = f", within the limit of {format_bytes(state.host_limit)}" if state.host_limit else ""
    reason = (
        f"real values fit in host memory: at most {format_bytes(state.host_peak)} at once{limit}"
    )
    if requested == "real":
        reason = "asked for (values='real'); " + reason
    return {"requested": requested, "ran": "real", "reason": reason, "placeholder_from": None}


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


def _count_batch(state: SimState, args: Any) -> None:
    """Samples and tokens an outermost module was called on: the first dimension of its
    first tensor argument, and that tensor's elements where it holds integer token ids
    (the report's throughput, in the script's own units)."""
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if first is None or first.dim() == 0:
        return
    state.batch_seen[0] += int(first.shape[0])
    if not first.is_floating_point() and not first.is_complex() and first.dim() == 2:
        state.batch_seen[1] += int(first.numel())


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
            ``"placeholder"``: they hold no data (for models larger than host memory);
            ``"auto"``: real values until an operation would need more host memory than
            the limit (or the machine) has room for, then placeholder values from that
            line on, in place (``report.values_decision`` says where and why).
        host_memory_limit: with real values, the most host memory the simulated GPUs'
            tensors may take (bytes or text); default: half the memory available now.
            Before each operation the host memory it will take is checked against it, and
            against the memory available at the time: an operation that would not fit the
            simulated GPU raises its ``torch.OutOfMemoryError``; one that fits the GPU but
            not the host raises :class:`HostMemoryError` (``"auto"``: switches).
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
            "computes every value on the CPU, 'placeholder' keeps shapes only, 'auto' is "
            "real until the host runs short of memory."
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
        real=values != "placeholder", host_limit=limit if values != "placeholder" else None,
        auto=values == "auto",
    )  # fmt: skip
    state.host_limit_given = host_memory_limit is not None
    for d in state.physical:
        d.estimate = StepEstimate(peaks)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be a whole number >= 1, got {nodes!r}.")
    net = catalog.network(network) if network else catalog.network()
    state.topology = Topology(nodes, gpus, float(net.bandwidth_bytes_per_s))

    def on_op(
        func: Any, args: Any, kwargs: Any, out: Any, label: int, inputs: Any, outputs: Any
    ) -> None:
        tf32 = cublas_allows_tf32()  # what cuBLAS reads (the legacy getter may raise)
        scope = state.scopes[-1] if state.scopes else None
        estimate = state.devices[label].estimate
        assert estimate is not None  # set for every device above
        cost = op_cost(func, args, kwargs, out, peaks, tf32=tf32, inputs=inputs, outputs=outputs)
        estimate.add(cost, scope)
        if cost.bound != "none":
            state.trace.op(label, cost.flops, cost.bytes, cost.precision, cost.signature, cost.host)

    dispatch = SimDispatchMode(state, on_op)
    fmode = SimFunctionMode(state, dispatch)
    names: dict[int, str] = {}

    def pre_forward(mod: torch.nn.Module, args: Any) -> None:
        if not state.scopes:  # an outermost module: count its batch, mark the call
            _count_batch(state, args)
            for d in state.devices:
                if d.estimate is not None:
                    d.call_marks.append((*d.estimate.mark(), *state.batch_seen))
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
        if state.real:  # the memory other processes hold changes: look again each step
            state.room.look(state.host_bytes)  # type: ignore[union-attr]
        elif state.scout is not None:  # values="auto", deciding (torchplace.sim._values)
            state.scout.step()
        for d in state.devices:
            d.step_marks.append(d.estimate.seconds if d.estimate else 0.0)
            if d.estimate is not None:
                d.time_marks.append((*d.estimate.mark(), *state.batch_seen))

    host_seconds = op_host_seconds(peaks.timing.params) if peaks.timing is not None else 0.0
    report = SimReport(
        gpu={"key": spec.key, "name": spec.name, "torch_name": spec.torch_name},
        torch_version=torch.__version__,
        values=values,
        assumptions=[
            f"{spec.torch_name}: {spec.bandwidth_bytes_per_s / 1e12:.2f} TB/s, dense peaks "
            + ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in spec.peak_flops.items()),
            "each kernel is priced by its class (matrix products and convolutions by tiles "
            "and waves, attention by its kernel, the rest at the achievable bandwidth)"
            + (f" plus {peaks.launch_seconds * 1e6:.1f} µs" if peaks.launch_seconds else "")
            + "; the host issues each operation "
            f"in {host_seconds * 1e6:.0f} µs (eager PyTorch; "
            "docs/time-model.md); host copies at "
            f"{(peaks.host_bandwidth_bytes_per_s or 0) / 1e9:.0f} GB/s per direction",
            "a step is the work between two optimizer.step() calls (in a script that takes "
            "none, between two calls of its outermost module)",
            "times the script measures itself with time.time() or perf_counter() are this "
            "CPU's, not the GPU's; torch.cuda.Event.elapsed_time returns the estimate",
        ],
    )
    report._state = state  # (report.state: live during the block, for the command line's child)
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
        report.values_decision = _values_decision(values, state)
        report.values = report.values_decision["ran"]
        if state.switched is not None:  # the note that says so first
            first = [n for n in report.notes if n["text"].startswith("values: ")]
            report.notes = first + [n for n in report.notes if n not in first]
