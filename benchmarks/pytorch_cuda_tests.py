"""PyTorch's own CUDA tests on simulated GPUs: how much of ``test/test_cuda.py`` passes.

Takes the path of a PyTorch source checkout (its test code is never copied into this
repository) and runs, against the installed torch, in a child process each:

- ``test/test_cuda.py`` under ``pytest --sim-gpu GPU`` (one simulated GPU);
- ``test/test_cuda_multigpu.py`` under ``pytest --sim-gpu GPU --sim-gpus 2``.

A small plugin written beside the runs records every test's outcome. The script prints
pass / fail / skip per test class, then each failure with the first line of its error,
split in two: failures of tests that need real hardware, each with the reason (the test
starts a separate Python process, which sees no GPU on a machine without one; it compiles
CUDA C++ at run time with NVRTC or nvcc; it drives the CUDA driver through cuda-python),
and simulator gaps (everything else). The figure that matters: of the tests that ran and do
not need real hardware, the share that passed.

PyTorch's tests need ``expecttest`` (``pip install expecttest``); ``pytest-timeout`` is
used when installed (``--timeout`` seconds per test).

Run:
    .venv/bin/python benchmarks/pytorch_cuda_tests.py ~/src/pytorch [--gpu H100] [--json]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: (file, simulated GPUs) run by default
FILES = (("test_cuda.py", 1), ("test_cuda_multigpu.py", 2))

#: What in a failing test's source (or its error) makes it need real hardware, and why.
NEEDS_HARDWARE = (
    (
        ("subprocess.", "sys.executable", 'get_context("spawn")', "ctx.Pool(", "mp.spawn("),
        "starts a separate Python process, which runs outside the session's simulation "
        "(on a machine without a GPU it sees none)",
    ),
    (
        ("_compile_kernel", "load_inline", "not simulated: compiling CUDA C++"),
        "compiles CUDA C++ at run time (NVRTC, nvcc) and launches it",
    ),
    (("cuda.bindings", "cudart.cudaGraph", "libcuda"), "drives the CUDA driver directly"),
    (
        ("pynvml", "amdsmi", "NVML"),
        "reads the driver's management library (NVML: memory in use, clocks, temperature)",
    ),
    (
        ("corrupt",),
        "expects kernels running at the same time on a GPU to corrupt each other's memory "
        "(a race a simulation that runs them in order does not have)",
    ),
)

#: Failures of the machine the tests run on, neither the simulator's nor a GPU's: (what in
#: the error says so, why)
ENVIRONMENT = (
    (
        (
            "more than the host could allocate",
            "DefaultCPUAllocator: can't allocate",
            # HostMemoryError: the real values would not fit the host room left (the limit,
            # or what the machine, shared with other jobs, has available)
            "tensors hold real values in host memory",
        ),
        "needs more host memory than the run allows (real values live on the host; --host-memory)",
    ),
    (("URLError", "Name or service not known"), "downloads from the network"),
    (("Error building extension", "Could not load this library"), "builds a C++ extension"),
    (("ModuleNotFoundError: No module named",), "imports a package not installed"),
)

_ATTRIBUTE = re.compile(r"module '(torch[\w.]*)' has no attribute '(\w+)'")


@functools.cache
def _torch_sources() -> str:
    import torch

    root = Path(torch.__file__).parent
    return "\n".join(p.read_text(errors="ignore") for p in root.rglob("*.py"))


def environment_reason(message: str) -> str | None:
    """Why a failure is the test machine's or the test file's, not the simulator's."""
    for needles, why in ENVIRONMENT:
        if any(n in message for n in needles):
            return why
    found = _ATTRIBUTE.search(message)
    if found and found.group(2) not in _torch_sources():
        # no file of the installed torch names it: an API newer than the installed torch
        return f"uses {found.group(1)}.{found.group(2)}, which the installed torch has not"
    return None


_RECORDER = r"""
import inspect, json, os

_OUT = os.environ["TORCHPLACE_PYTORCH_TESTS_OUT"]
_results = {}


def _source(item):
    try:
        return inspect.getsource(getattr(item, "function", item.obj))
    except (OSError, TypeError):
        return ""


def _first_line(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0] if crash.message else ""
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return str(report.longrepr[2])
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""


import pytest


def pytest_configure(config):
    # Names the test files import from torch.testing that an older torch lacks, as the test
    # files' own PyTorch defines them (test_cuda_multigpu.py defines TEST_CUDAMALLOCASYNC
    # so itself); each one added is reported.
    import unittest

    import torch
    from torch.testing._internal import common_utils as cu

    added = []
    if not hasattr(cu, "TEST_CUDAMALLOCASYNC"):
        cu.TEST_CUDAMALLOCASYNC = cu.TEST_CUDA and (
            torch.cuda.get_allocator_backend() == "cudaMallocAsync"
        )
        added.append("common_utils.TEST_CUDAMALLOCASYNC")
    if not hasattr(cu, "skipIfSandcastle"):
        cu.skipIfSandcastle = lambda reason: unittest.skipIf(cu.IS_SANDCASTLE, reason)
        added.append("common_utils.skipIfSandcastle")
    _write({"<shims>": {"outcome": "shim", "message": ", ".join(added), "source": ""}})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.torchplace_source = _source(item) if report.failed else ""
    return report


def _write(entry):
    with open(_OUT + ".lines", "a") as f:
        f.write(json.dumps(entry) + "\n")


def pytest_runtest_logstart(nodeid, location):
    _write({"<started>": nodeid})  # the test under way, should the process die


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "message": "", "source": ""})
    if report.failed:
        if entry["outcome"] != "failed":
            entry.update(outcome="failed", message=_first_line(report))
            entry["source"] = getattr(report, "torchplace_source", "")
    elif report.skipped and entry["outcome"] == "passed":
        if getattr(report, "wasxfail", None) is not None:
            entry.update(outcome="xfailed", message=str(report.wasxfail))
        else:
            entry.update(outcome="skipped", message=_first_line(report))
    if report.when == "teardown":
        _write({report.nodeid: entry})  # kept if the process dies


def pytest_collectreport(report):
    if report.failed:
        _write({report.nodeid or "collection": {
            "outcome": "error", "message": _first_line(report), "source": ""}})


def pytest_sessionfinish(session, exitstatus):
    _write({"<finished>": exitstatus})
"""


@dataclass
class FileResult:
    """One test file's run."""

    file: str
    gpus: int
    seconds: float
    exit_code: int
    by_class: dict[str, dict[str, int]] = field(default_factory=dict)
    needs_hardware: dict[str, str] = field(default_factory=dict)  # test -> why
    gaps: dict[str, str] = field(default_factory=dict)  # test -> first error line
    environment: dict[str, str] = field(default_factory=dict)  # test -> why not the sim's
    skips: dict[str, int] = field(default_factory=dict)  # reason -> tests
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    shims: str = ""  # names added to an older torch.testing for the test files' imports


def hardware_reason(source: str) -> str | None:
    """Why a failing test needs real hardware, from its source, or None."""
    for needles, why in NEEDS_HARDWARE:
        if any(n in source for n in needles):
            return why
    return None


def _limit_memory(nbytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (nbytes, nbytes))


def _run_pytest(
    path: Path, cmd: list[str], env: dict[str, str], lines: Path, host_memory: int
) -> dict[str, dict[str, str]]:
    """Run pytest until every test has a result: a test that kills the process (a crash,
    the memory limit) is recorded as failed and the run goes on past it."""
    results: dict[str, dict[str, str]] = {}
    done: set[str] = set()
    while True:
        lines.unlink(missing_ok=True)
        deselect = [a for nodeid in sorted(done) for a in ("--deselect", nodeid)]
        proc = subprocess.run(
            [*cmd, *deselect],
            cwd=path.parent,
            env=env,
            capture_output=True,
            text=True,
            preexec_fn=lambda: _limit_memory(host_memory),  # before the child starts threads
        )
        started, finished = None, False
        for line in lines.read_text().splitlines() if lines.is_file() else ():
            entry = json.loads(line)
            if "<started>" in entry:
                started = entry["<started>"]
            elif "<finished>" in entry:
                finished = True
            else:
                results.update(entry)
                done.update(k for k in entry if not k.startswith("<"))
                started = None
        if finished:
            return results
        if started is None:
            tail = (proc.stdout + proc.stderr)[-3000:]
            raise SystemExit(
                f"error: pytest on {path.name} stopped (exit {proc.returncode}):\n{tail}"
            )
        crash = (proc.stderr or proc.stdout).strip().splitlines()
        why = next((c for c in crash if "Fatal Python error" in c), f"exit {proc.returncode}")
        results[started] = {
            "outcome": "failed",
            "message": f"the test process died ({why.strip()}); the run went on without it",
            "source": "",
        }
        done.add(started)


def run_file(
    checkout: Path,
    name: str,
    gpus: int,
    gpu: str,
    timeout: int,
    extra: list[str],
    host_memory: int,
) -> FileResult:
    path = checkout / "test" / name
    if not path.is_file():
        raise SystemExit(f"error: {path} does not exist; PATH must be a PyTorch checkout")
    with tempfile.TemporaryDirectory(prefix="torchplace-pytorch-tests-") as tmp:
        plugin = Path(tmp) / "torchplace_pytorch_tests_recorder.py"
        plugin.write_text(_RECORDER)
        out = Path(tmp) / "results.json"
        env = dict(os.environ)
        env["TORCHPLACE_PYTORCH_TESTS_OUT"] = str(out)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tmp, env.get("PYTHONPATH")) if p)
        # the C++ extensions some tests build (cpp_extension.load_inline), in a folder of
        # this run's: a lock left in the shared cache by a run that was killed while it
        # built makes every later build wait for it, with no end
        env["TORCH_EXTENSIONS_DIR"] = str(Path(tmp) / "extensions")
        cmd = [
            sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider",
            "-p", "no:flaky",  # it keeps every test's exception, and so its tensors
            "-p", "torchplace_pytorch_tests_recorder", "--sim-gpu", gpu,
            "--sim-gpus", str(gpus), "-o", "addopts=", *extra,
        ]  # fmt: skip
        if importlib.util.find_spec("pytest_timeout") is not None:
            cmd.append(f"--timeout={timeout}")
        start = time.perf_counter()
        results = _run_pytest(path, cmd, env, Path(str(out) + ".lines"), host_memory)
        seconds = time.perf_counter() - start
    res = FileResult(name, gpus, round(seconds, 1), 0)
    res.shims = results.pop("<shims>", {}).get("message", "")
    by_class: dict[str, Counter[str]] = defaultdict(Counter)
    skips: Counter[str] = Counter()
    for nodeid, entry in sorted(results.items()):
        parts = nodeid.split("::")
        cls = parts[1] if len(parts) > 2 else "(module)"
        test = "::".join(parts[1:]) or nodeid
        outcome = entry["outcome"]
        if outcome in ("passed", "xfailed"):
            by_class[cls]["passed"] += 1
            res.passed += 1
        elif outcome == "skipped":
            by_class[cls]["skipped"] += 1
            res.skipped += 1
            skips[entry["message"][:160]] += 1
        elif (env := environment_reason(entry["message"])) is not None:
            by_class[cls]["environment"] += 1
            res.environment[test] = env
        else:
            why = hardware_reason(entry.get("source", "") + "\n" + entry["message"])
            if why is not None:
                by_class[cls]["needs hardware"] += 1
                res.needs_hardware[test] = why
            else:
                by_class[cls]["failed"] += 1
                res.failed += 1
                res.gaps[test] = entry["message"][:300]
    res.by_class = {k: dict(v) for k, v in sorted(by_class.items())}
    res.skips = dict(skips.most_common())
    return res


def render(results: list[FileResult], gpu: str) -> str:
    import torch

    lines = [f"torch {torch.__version__}, simulated {gpu}"]
    total_pass = total_fail = 0
    for r in results:
        lines.append("")
        lines.append(
            f"{r.file} ({r.gpus} simulated GPU{'s' if r.gpus > 1 else ''}, {r.seconds:.0f} s)"
        )
        if r.shims:
            lines.append(f"  added for the test files' imports: {r.shims}")
        head = f"  {'class':<40} {'pass':>5} {'fail':>5} {'hw':>5} {'env':>5} {'skip':>5}"
        lines.append(head)
        for cls, c in r.by_class.items():
            lines.append(
                f"  {cls:<40} {c.get('passed', 0):>5} {c.get('failed', 0):>5} "
                f"{c.get('needs hardware', 0):>5} {c.get('environment', 0):>5} "
                f"{c.get('skipped', 0):>5}"
            )
        ran = r.passed + r.failed
        share = 100.0 * r.passed / ran if ran else 0.0
        lines.append(
            f"  passed {r.passed} of {ran} that ran and need no real hardware ({share:.1f}%); "
            f"{len(r.needs_hardware)} need real hardware; {len(r.environment)} fail for the "
            f"machine or the test file (env); {r.skipped} skipped"
        )
        for title, failures in (
            ("simulator gaps", r.gaps),
            ("need real hardware", r.needs_hardware),
            ("the machine's or the test file's (env)", r.environment),
        ):
            if failures:
                lines.append(f"  {title}:")
                lines += [f"    {t}: {m}" for t, m in failures.items()]
        if r.skips:
            lines.append("  skipped (reason: tests):")
            lines += [f"    {why}: {n}" for why, n in r.skips.items()]
        total_pass += r.passed
        total_fail += r.failed
    ran = total_pass + total_fail
    lines.append("")
    lines.append(
        f"all files: {total_pass} of {ran} tests that ran and need no real hardware passed "
        f"({100.0 * total_pass / ran if ran else 0.0:.1f}%)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run PyTorch's test/test_cuda.py and test/test_cuda_multigpu.py (from a "
        "PyTorch checkout) on simulated GPUs against the installed torch, and report "
        "pass/fail/skip per test class and each failure's reason."
    )
    parser.add_argument("checkout", type=Path, help="a PyTorch source checkout (its test/ folder)")
    parser.add_argument("--gpu", default="H100", help="catalog GPU to simulate (default H100)")
    parser.add_argument(
        "--file", action="append", dest="files", metavar="NAME",
        help="a test file under test/ (repeatable; default: both); NAME:N simulates N GPUs",
    )  # fmt: skip
    parser.add_argument("--timeout", type=int, default=300, help="seconds per test (default 300)")
    parser.add_argument(
        "--host-memory", type=float, default=4.0, metavar="GIB",
        help="host memory each pytest process may take (default 4 GiB): the simulated GPUs' "
        "tensors hold real values on the host; a test needing more is reported apart",
    )  # fmt: skip
    parser.add_argument("-k", dest="keyword", help="pytest -k expression (a subset of the tests)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("expecttest") is None:
        parser.error("PyTorch's tests import expecttest: pip install expecttest")
    files = FILES
    if args.files:
        files = tuple(
            (f.split(":")[0], int(f.split(":")[1]) if ":" in f else 1) for f in args.files
        )
    extra = ["-k", args.keyword] if args.keyword else []
    results = [
        run_file(
            args.checkout, name, gpus, args.gpu, args.timeout, extra, int(args.host_memory * 2**30)
        )
        for name, gpus in files
    ]
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        print(render(results, args.gpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
