"""pytest plugin: run GPU tests on simulated GPUs, in CI machines that have none.

Installed with torchplace (a ``pytest11`` entry point) and inactive unless asked:

- ``pytest --sim-gpu H100 [--sim-gpus 2] [--sim-values placeholder]`` runs the whole
  session on simulated GPUs: ``torch.cuda.is_available()`` is True from before the first
  ``conftest.py`` is imported, so ``@pytest.mark.skipif(not torch.cuda.is_available())``
  tests run, and tensors made at a test module's import live on the simulated GPUs too.
- ``@pytest.mark.sim_gpu("A100 40GB", gpus=2)`` runs one test (its fixtures included) on
  simulated GPUs; a test that asks for the ``sim`` fixture runs on them too (one simulated
  H100 80GB unless a marker says otherwise).
- The ``sim`` fixture gives the test a :class:`SimulatedGPUs`: the simulated devices' memory,
  transfers and synchronisations, read live, so memory is a unit test::

      @pytest.mark.sim_gpu("A100 40GB")
      def test_training_step_fits(sim):
          train_one_step(batch_size=64)
          assert sim.peak_allocated_bytes(0) < 20 * 2**30

Values are real (computed on the CPU) unless ``values="placeholder"`` is asked for, or
``values="auto"``: real until the host runs short of memory, then placeholders from that line
on (where ``"real"`` stops the test with ``HostMemoryError``). What a
GPU would raise is raised at the test's line: ``torch.OutOfMemoryError`` past the simulated
capacity, "Expected all tensors to be on the same device", "CUDA error: invalid device
ordinal" for ``cuda:N`` beyond the simulated count. See ``docs/sim.md``.
"""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from torchplace import catalog

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator
    from types import TracebackType

    from torchplace.sim.accounting._state import SimState
    from torchplace.sim.report import SimReport

__all__ = ["SimulatedGPUs", "Sync", "Transfer", "simulating"]

#: ``simulate(values=...)``; kept here so that loading the plugin does not import torch
#: (the plugin is loaded by every pytest run in an environment that has torchplace).
_VALUES = ("real", "placeholder", "auto")
_MARKER_KWARGS = ("gpus", "values", "memory", "context_bytes", "host_memory_limit")


# --------------------------------------------------------------------------- options


def _gpu_option(text: str) -> str:
    """``--sim-gpu``: a catalog name; argparse turns the error into a usage error."""
    try:
        return catalog.lookup(text).key
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _count_option(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of simulated GPUs >= 1, got {text!r}"
        )
    return n


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchplace", "simulated GPUs (torchplace)")
    group.addoption(
        "--sim-gpu",
        metavar="NAME",
        type=_gpu_option,
        default=None,
        help="run the whole session on simulated GPUs of this model (catalog name: H100, "
        "'A100 40GB', T4, ...; see `torchplace sim --list-gpus`): torch.cuda.is_available() "
        "is True and tensors on cuda:N hold real values computed on the CPU.",
    )
    group.addoption(
        "--sim-gpus",
        metavar="N",
        type=_count_option,
        default=None,
        help="how many simulated GPUs --sim-gpu gives the session (default 1): cuda:0 to "
        "cuda:N-1; a larger ordinal raises CUDA's 'invalid device ordinal'.",
    )
    group.addoption(
        "--sim-values",
        choices=_VALUES,
        default=None,
        help="what simulated tensors hold: 'real' values computed on the CPU (default), "
        "'placeholder' (shapes only, zeros when read: for models larger than host memory), "
        "or 'auto' (real until the host runs short of memory, placeholders from there).",
    )
    parser.addini(
        "sim_gpu_default",
        "the GPU a test marked @pytest.mark.sim_gpu without a name (or asking for the sim "
        "fixture) is simulated on",
        default=catalog.DEFAULT_GPU,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "sim_gpu(gpu=None, *, gpus=1, values='real', memory=None, context_bytes=None, "
        "host_memory_limit=None): run this test and its fixtures on simulated GPUs "
        "(torchplace.simulate); the `sim` fixture reads their memory, transfers and syncs.",
    )


# --------------------------------------------------------------------------- simulations


class _Simulation:
    """One running ``simulate()`` block, entered in one hook and left in another."""

    def __init__(self, spec: catalog.GPUSpec, gpus: int, kwargs: dict[str, Any]) -> None:
        from torchplace.sim import simulate

        self.spec = spec
        self.gpus = gpus
        self.values: str = kwargs.get("values") or "real"
        self._stack = contextlib.ExitStack()
        # in tests, files go where the test says (docs/sim.md, "Files the script saves")
        self.report: SimReport = self._stack.enter_context(
            simulate(spec, gpus=gpus, write_files=True, **kwargs)
        )
        try:
            self.state = _running_state()
        except BaseException:
            self._stack.close()
            raise

    def close(self) -> None:
        self._stack.close()

    def describe(self) -> str:
        values = {"real": "real values", "placeholder": "placeholder values"}.get(
            self.values, "real values until the host runs short, then placeholders"
        )
        switched = getattr(self, "state", None) and self.state.switched
        if switched:
            values = f"placeholder values since {switched['file']}:{switched['line']}"
        return f"{self.gpus} × simulated {self.spec.name} ({values})"


def _running_state() -> SimState:
    """The state of the simulation just entered (its dispatch mode holds it)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from torchplace.sim.emulation._modes import SimDispatchMode

    for mode in reversed(_get_current_dispatch_mode_stack()):
        if isinstance(mode, SimDispatchMode):
            return mode.state
    raise RuntimeError(  # an invariant: simulate() pushes its dispatch mode
        "torchplace's pytest plugin found no running simulation after entering simulate()."
    )


def simulating() -> bool:
    """Whether a torchplace simulation is running in this thread now (so ``torch.cuda``
    answers for simulated GPUs): for a conftest that must tell a real GPU from one.

    Examples:
        >>> from torchplace.pytest_plugin import simulating
        >>> simulating()
        False
    """
    import sys

    if "torch" not in sys.modules:
        return False
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from torchplace.sim.emulation._modes import SimDispatchMode

    return any(isinstance(m, SimDispatchMode) for m in _get_current_dispatch_mode_stack())


_SESSION = pytest.StashKey["_Simulation | None"]()
_ITEM = pytest.StashKey["_Simulation"]()
_FIXTURE = pytest.StashKey["SimulatedGPUs"]()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """Start ``--sim-gpu``'s simulation before any conftest.py or test module is imported,
    so what they ask ``torch.cuda`` at import (skipif conditions, parametrize lists) and the
    tensors they make are the simulated GPUs'."""
    ns = early_config.known_args_namespace
    gpu, gpus, values = ns.sim_gpu, ns.sim_gpus, ns.sim_values
    early_config.stash[_SESSION] = None
    if gpu is None:
        if gpus is not None or values is not None:
            given = "--sim-gpus" if gpus is not None else "--sim-values"
            raise pytest.UsageError(
                f"{given} applies to the simulated GPUs of --sim-gpu, which was not given: "
                "add --sim-gpu NAME (for example --sim-gpu H100)."
            )
        return
    kwargs = {"values": values} if values is not None else {}
    sim = _Simulation(catalog.lookup(gpu), gpus or 1, kwargs)
    early_config.stash[_SESSION] = sim
    early_config.add_cleanup(sim.close)


def pytest_report_header(config: pytest.Config) -> str | None:
    sim = config.stash.get(_SESSION, None)
    return None if sim is None else f"torchplace sim: {sim.describe()} (--sim-gpu)"


def _marker_request(item: pytest.Item) -> tuple[str | None, dict[str, Any]] | None:
    """(gpu, simulate() keyword arguments) the test's ``sim_gpu`` marker asks for; None if
    it has none. Bad arguments fail the test with what is wrong."""
    marker = item.get_closest_marker("sim_gpu")
    if marker is None:
        return None
    if len(marker.args) > 1:
        _fail(item, f"takes one GPU name, got {len(marker.args)} positional arguments")
    unknown = sorted(set(marker.kwargs) - {"gpu", *_MARKER_KWARGS})
    if unknown:
        _fail(
            item,
            f"unknown argument(s) {', '.join(unknown)}; it takes a GPU name and "
            f"{', '.join(_MARKER_KWARGS)}",
        )
    kwargs = dict(marker.kwargs)
    gpu = marker.args[0] if marker.args else kwargs.pop("gpu", None)
    if gpu is not None and not isinstance(gpu, str):
        _fail(item, f"the GPU is a catalog name such as 'H100', got {gpu!r}")
    values = kwargs.get("values")
    if values is not None and values not in _VALUES:
        _fail(item, f"values must be one of {', '.join(map(repr, _VALUES))}, got {values!r}")
    return gpu, kwargs


def _lookup(item: pytest.Item, gpu: str) -> catalog.GPUSpec:
    try:
        return catalog.lookup(gpu)
    except ValueError as e:
        error = str(e).rstrip(".")
    _fail(item, error)


def _fail(item: pytest.Item, why: str) -> NoReturn:
    pytest.fail(f"{item.nodeid}: @pytest.mark.sim_gpu: {why}.", pytrace=False)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Start a test's own simulation before its fixtures are set up (and before skipif
    strings are evaluated), when it has a ``sim_gpu`` marker or asks for ``sim``. The
    innermost wrapper: pytest's own wrappers (logging, capture) have begun, so a bad
    marker fails the test like any setup error."""
    request = _marker_request(item)
    wants_fixture = "sim" in getattr(item, "fixturenames", ())
    session = item.config.stash.get(_SESSION, None)
    if session is not None and request is not None:
        _check_session_fits(item, session, *request)
    elif session is None and (request is not None or wants_fixture):
        gpu, kwargs = request if request is not None else (None, {})
        name = gpu or item.config.getini("sim_gpu_default")
        gpus = kwargs.pop("gpus", 1)
        error = None
        try:
            item.stash[_ITEM] = _Simulation(catalog.lookup(name), gpus, kwargs)
        except (ValueError, TypeError) as e:  # the catalog's or simulate()'s argument errors
            error = str(e).rstrip(".")
        if error is not None:
            _fail(item, error)
    if wants_fixture:
        # peaks, transfers and syncs count from here: the test's fixtures are included
        sim = item.stash.get(_ITEM, None) or session
        if sim is not None:
            item.stash[_FIXTURE] = SimulatedGPUs(sim, session=sim is session)
    return (yield)


def _check_session_fits(
    item: pytest.Item, session: _Simulation, gpu: str | None, kwargs: dict[str, Any]
) -> None:
    """Under ``--sim-gpu`` a marked test runs in the session's simulation (simulations do
    not nest) when its marker names what the session simulates; else it skips, saying why."""
    wanted: list[str] = []
    if gpu is not None:
        spec = _lookup(item, gpu)
        if spec.key != session.spec.key:
            wanted.append(f"GPU {spec.name}")
    if "gpus" in kwargs and kwargs["gpus"] != session.gpus:
        wanted.append(f"gpus={kwargs['gpus']}")
    if kwargs.get("values", session.values) != session.values:
        wanted.append(f"values={kwargs['values']!r}")
    other = sorted(k for k in kwargs if k not in ("gpus", "values"))
    if other:
        wanted.append(", ".join(other))
    if wanted:
        pytest.skip(
            f"@pytest.mark.sim_gpu asks for {'; '.join(wanted)}, but this session runs on "
            f"{session.describe()} (--sim-gpu) and simulations do not nest: run it without "
            "--sim-gpu (its marker then simulates it alone), or with --sim-gpu/--sim-gpus/"
            "--sim-values that match the marker"
        )


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """End a test's own simulation once its fixtures are torn down."""
    try:
        return (yield)
    finally:
        if _FIXTURE in item.stash:
            del item.stash[_FIXTURE]
        sim = item.stash.get(_ITEM, None)
        if sim is not None:
            del item.stash[_ITEM]
            sim.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test under simulation ends its traceback at the user's line, as on a GPU
    (where the error comes from CUDA), and shows the simulated devices' memory."""
    sim = item.stash.get(_ITEM, None) or item.config.stash.get(_SESSION, None)
    hidden = False
    if sim is not None and call.excinfo is not None:
        hidden = _hide_simulator_frames(call.excinfo, item.config)
    report = yield
    if sim is not None and report.failed and call.when in ("setup", "call"):
        report.sections.append(("torchplace sim", _summary(sim, hidden)))
    return report


def _hide_simulator_frames(excinfo: pytest.ExceptionInfo[BaseException], config: Any) -> bool:
    """Cut the traceback of an error a GPU would raise (out of memory, device rules: a
    ``RuntimeError`` or ``MemoryError``) where the simulator's code begins. Other errors
    keep every frame: they may be the simulator's own bugs. ``--full-trace`` keeps all."""
    import os

    from _pytest._code import Traceback

    if config.getoption("fulltrace", False) or not isinstance(
        excinfo.value, (RuntimeError, MemoryError)
    ):
        return False
    sim_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim") + os.sep
    prev: TracebackType | None = None
    tb: TracebackType | None = excinfo.tb
    while tb is not None:
        if prev is not None and tb.tb_frame.f_code.co_filename.startswith(sim_dir):
            prev.tb_next = None  # the exception now ends where CUDA's would be raised
            excinfo.traceback = Traceback(excinfo.tb)
            return True
        prev, tb = tb, tb.tb_next
    return False


def _summary(sim: _Simulation, hidden: bool) -> str:
    from torchplace._units import format_bytes

    sim.state.sync()
    lines = [sim.describe()]
    for dev in sim.state.devices:
        alloc = dev.allocator
        lines.append(
            f"cuda:{dev.index}: allocated {format_bytes(alloc.allocated_bytes)}, peak "
            f"{format_bytes(alloc.peak_allocated_bytes)}, reserved "
            f"{format_bytes(alloc.reserved_bytes)} of {format_bytes(dev.capacity)}"
        )
    if sim.state.oom is not None:
        oom = sim.state.oom
        lines.append(f"out of memory on cuda:{oom['device']} at {oom['file']}:{oom['line']}")
    lines.append("sizes in GiB = 1024³ bytes")
    if hidden:
        lines.append("the traceback stops where torchplace's simulator begins (--full-trace: all)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the fixture


@dataclass(frozen=True)
class Transfer:
    """Copies of one kind (``h2d``, ``d2h``, ``d2d``): how many and their bytes."""

    count: int
    bytes: int


@dataclass(frozen=True)
class Sync:
    """Where the host waited for a simulated GPU (``.item()``, ``.cpu()``, ``print`` ...)."""

    kind: str
    file: str
    line: int
    count: int


class SimulatedGPUs:
    """The simulated GPUs a test runs on (the ``sim`` fixture), read live.

    Memory figures are the caching-allocator model's, as ``torch.cuda.memory_allocated()``
    and friends report them; peaks, transfers and syncs count from the start of the test
    (or the last :meth:`reset`). Devices are ``0``, ``"cuda:1"`` or ``torch.device``.

    Examples:
        >>> def test_step_fits(sim):  # doctest: +SKIP
        ...     model = torch.nn.Linear(4096, 4096).cuda()
        ...     model(torch.randn(64, 4096, device="cuda")).sum().backward()
        ...     assert sim.peak_allocated_bytes(0) < 300 * 2**20
        ...     assert sim.transfers("h2d").count == 0 and not sim.syncs()
    """

    def __init__(self, sim: _Simulation, *, session: bool) -> None:
        self._sim = sim
        #: True under ``--sim-gpu`` (one simulation for the session), False for one test.
        self.session = session
        self._transfers: dict[str, tuple[int, int]] = {}
        self._syncs: Counter[tuple[str, str, int]] = Counter()
        self.reset()

    @property
    def gpu(self) -> catalog.GPUSpec:
        """The simulated GPU model's catalog entry."""
        return self._sim.spec

    @property
    def count(self) -> int:
        """How many GPUs are simulated (``torch.cuda.device_count()``)."""
        return self._sim.gpus

    @property
    def values(self) -> str:
        """What the simulated tensors hold now: ``"real"`` or ``"placeholder"`` (with
        ``values="auto"``, ``"placeholder"`` once the host ran short of memory)."""
        return "real" if self._sim.state.real else "placeholder"

    @property
    def report(self) -> SimReport:
        """The simulation's :class:`~torchplace.sim.SimReport`. It is filled in when the
        simulation ends (after this test's teardown, or at the end of a ``--sim-gpu``
        session): during the test, use this object's methods."""
        return self._sim.report

    def _index(self, device: Any) -> int:
        import torch

        if isinstance(device, int) and not isinstance(device, bool):
            index: int | None = device
        else:
            try:
                dev = torch.device(device)
            except (RuntimeError, TypeError) as e:
                raise ValueError(f"not a device: {device!r} ({e})") from None
            index = dev.index if dev.type == "cuda" else None
            if dev.type == "cuda" and index is None:
                index = torch.cuda.current_device()
        if index is None or not 0 <= index < self.count:
            raise ValueError(
                f"{device!r} is not a simulated GPU: this test runs on {self.count} simulated "
                f"GPU(s), cuda:0 to cuda:{self.count - 1}."
            )
        return index

    def _device(self, device: Any) -> Any:
        state = self._sim.state
        state.sync()  # storages that died are freed
        return state.devices[self._index(device)]

    def capacity_bytes(self, device: Any = 0) -> int:
        """What the device reports as total memory (``get_device_properties().total_memory``)."""
        return int(self._device(device).capacity)

    def allocated_bytes(self, device: Any = 0) -> int:
        """Bytes in live tensors now (``torch.cuda.memory_allocated``)."""
        return int(self._device(device).allocator.allocated_bytes)

    def peak_allocated_bytes(self, device: Any = 0) -> int:
        """The most bytes live tensors held at once since the test began
        (``torch.cuda.max_memory_allocated``)."""
        return int(self._device(device).allocator.peak_allocated_bytes)

    def reserved_bytes(self, device: Any = 0) -> int:
        """Bytes the caching allocator holds from the device now (``memory_reserved``)."""
        return int(self._device(device).allocator.reserved_bytes)

    def peak_reserved_bytes(self, device: Any = 0) -> int:
        """The most bytes the allocator held at once since the test began."""
        return int(self._device(device).allocator.peak_reserved_bytes)

    def transfers(self, kind: str) -> Transfer:
        """Copies since the test began: ``"h2d"`` host to GPU, ``"d2h"`` GPU to host (reads
        such as ``.item()`` included), ``"d2d"`` between simulated GPUs."""
        now = self._sim.state.transfers
        if kind not in now:
            raise ValueError(f"kind must be one of {', '.join(map(repr, now))}, got {kind!r}.")
        count0, bytes0 = self._transfers.get(kind, (0, 0))
        return Transfer(now[kind][0] - count0, now[kind][1] - bytes0)

    def syncs(self) -> list[Sync]:
        """Where the host waited for a GPU since the test began, most frequent first."""
        delta = Counter(self._sim.state.syncs)
        delta.subtract(self._syncs)
        return [Sync(k, f, ln, n) for (k, f, ln), n in delta.most_common() if n > 0]

    def reset(self) -> None:
        """Count peaks, transfers and syncs from now on (peaks as
        ``torch.cuda.reset_peak_memory_stats()`` does, on every simulated device)."""
        state = self._sim.state
        state.sync()
        for dev in state.devices:
            dev.allocator.reset_peak_stats()
        self._transfers = {k: (v[0], v[1]) for k, v in state.transfers.items()}
        self._syncs = Counter(state.syncs)

    def __repr__(self) -> str:
        return f"<SimulatedGPUs {self._sim.describe()}>"


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> SimulatedGPUs:
    """The simulated GPUs this test runs on (see :class:`SimulatedGPUs`).

    Asking for it runs the test on simulated GPUs: those of ``--sim-gpu``, of the test's
    ``@pytest.mark.sim_gpu(...)``, or else one simulated H100 80GB (the ini option
    ``sim_gpu_default`` names another). Its peaks, transfers and syncs count from the start
    of the test's setup, so what its fixtures allocate is included.
    """
    gpus = request.node.stash.get(_FIXTURE, None)
    if gpus is None:  # an invariant: pytest_runtest_setup made it
        raise RuntimeError(f"{request.node.nodeid}: the sim fixture found no simulation.")
    return gpus
