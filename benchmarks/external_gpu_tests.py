"""Another project's GPU-only tests, run on simulated GPUs: skipped before, and after.

The project is skorch (scikit-learn-compatible training for PyTorch; pure Python), whose
wheel ships its own test suite (``skorch.tests``). Its GPU tests are marked
``@pytest.mark.skipif(not torch.cuda.is_available(), reason="no cuda device")`` or call
``pytest.skip()`` for their ``"cuda"`` parameter, so on a CPU-only machine they skip. No
one here wrote them, and none of skorch's code is in this repository: pip installs the
pinned wheel (``pip install -e ".[dev]"`` does) and this script runs its tests from it.

It runs pytest twice on the same test modules, each in its own process, in a scratch
directory (skorch's tests write ``skorch/tests/net_cuda.pkl`` relative to the working
directory, as their CI does from the repository root):

1. ``pytest --pyargs skorch.tests.test_net skorch.tests.test_utils`` — as on a CPU-only CI;
2. the same with ``--sim-gpu H100`` — the whole session on one simulated H100, real values.

A small plugin written beside the runs records every test's outcome; the script prints how
many tests skipped before; of those, how many pass, fail, or did not run with ``--sim-gpu``
(and each failure's first error line); tests that exist only when CUDA is available
(skorch parametrizes some on ``torch.cuda.is_available()``); and the tests that passed on
the CPU but not in the simulated session. Failures that are a simulator bug have a case in
``tests/conformance/cases/`` (listed in the README).

Three tests load checkpoints that skorch's repository keeps beside its tests (saved on a
real GPU) and its wheel lacks: they fail with FileNotFoundError unless ``--data-from`` names
a checkout of skorch 1.4.0 to copy them from.

Run:
    .venv/bin/python benchmarks/external_gpu_tests.py [--gpu H100] [--json] [--data-from DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from importlib import metadata

PROJECT = "skorch"
VERSION = "1.4.0"  # the version the README's numbers are for (pyproject pins it)
MODULES = ("skorch.tests.test_net", "skorch.tests.test_utils")
# files in skorch's repository (saved on a CUDA machine) that some tests load; not in the wheel
_DATA_FILES = ("net_cuda.pt", "optimizer_cuda.pt", "net_cuda.pkl")


@dataclass
class Outcome:
    """One test's result in one run."""

    status: str  # passed, failed, error, skipped
    message: str = ""


@dataclass
class Summary:
    """What the two runs say about the GPU-only tests."""

    project: str
    version: str
    gpu: str
    tests_before: int
    skipped_before: int
    passed_before: int
    gpu_gated: int  # skipped before, ran (or could not run) under the simulation
    still_skipped: dict[str, int] = field(default_factory=dict)
    gated_outcomes: dict[str, int] = field(default_factory=dict)
    cuda_only_tests: dict[str, int] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    cpu_regressions: dict[str, str] = field(default_factory=dict)
    collection_errors: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


# A pytest plugin written next to the runs: the outcome of every test and every collection
# error, by node id (JUnit XML loses the module of a test collected with --pyargs).
_PLUGIN = """
import json, os

_tests, _collection = {}, {}

def _message(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    text = report.longreprtext or ""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    return (lines[0] if lines else text.strip().splitlines()[-1] if text.strip() else "")[:200]

def pytest_runtest_logreport(report):
    key = report.nodeid
    if report.when == "call" or (report.when == "setup" and not report.passed):
        status = "skipped" if report.skipped else report.outcome
        if hasattr(report, "wasxfail"):
            status = "xfailed" if report.skipped else "xpassed"
        if report.when == "setup" and report.failed:
            status = "error"
        _tests[key] = {"status": status, "message": _message(report)}
    elif report.when == "teardown" and report.failed and key in _tests:
        if _tests[key]["status"] == "passed":
            _tests[key] = {"status": "error", "message": _message(report)}

def pytest_collectreport(report):
    if report.failed:
        _collection[report.nodeid] = _message(report)

def pytest_sessionfinish(session):
    with open(os.environ["EXTERNAL_GPU_TESTS_OUT"], "w") as f:
        json.dump({"tests": _tests, "collection": _collection}, f)
"""


def run_pytest(extra: list[str], out: str, cwd: str, rootdir: str) -> float:
    """Run the test modules with the outcome plugin; return the wall seconds."""
    with open(os.path.join(cwd, "_external_outcomes.py"), "w") as f:
        f.write(_PLUGIN)
    cmd = [sys.executable, "-m", "pytest", "--pyargs", *MODULES, "-q", "-p", "no:cacheprovider"]
    cmd += ["-p", "_external_outcomes", "--continue-on-collection-errors", "--rootdir", rootdir]
    cmd += extra
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = cwd + os.pathsep + env.get("PYTHONPATH", "")
    env["EXTERNAL_GPU_TESTS_OUT"] = out
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def read_outcomes(path: str) -> tuple[dict[str, Outcome], dict[str, str]]:
    """(test id -> outcome, collector id -> its error) written by the plugin."""
    with open(path) as f:
        data = json.load(f)
    tests = {k: Outcome(v["status"], v["message"]) for k, v in data["tests"].items()}
    return tests, dict(data["collection"])


def compare(
    before: dict[str, Outcome],
    after: dict[str, Outcome],
    after_collection: dict[str, str],
    gpu: str,
    version: str,
) -> Summary:
    """Sort the tests by what the simulation changed for them."""
    skipped = {t: o for t, o in before.items() if o.status == "skipped"}
    summary = Summary(
        PROJECT,
        version,
        gpu,
        tests_before=len(before),
        skipped_before=len(skipped),
        passed_before=sum(o.status == "passed" for o in before.values()),
        gpu_gated=0,
        collection_errors=dict(after_collection),
    )
    gated: Counter[str] = Counter()
    still: Counter[str] = Counter()
    for test, was in skipped.items():
        now = after.get(test)
        if now is None:
            if not any(test.startswith(c + "::") for c in after_collection):
                continue  # gone for another reason: not counted
            gated["not run (its class did not collect)"] += 1
            summary.gpu_gated += 1
        elif now.status == "skipped":
            still[now.message or was.message or "Skipped"] += 1
        else:
            summary.gpu_gated += 1
            gated[now.status] += 1
            if now.status != "passed":
                summary.failures[test] = now.message
    new: Counter[str] = Counter()
    for test, now in after.items():
        if test not in before:
            new[now.status] += 1
            if now.status not in ("passed", "skipped"):
                summary.failures[test] = now.message
    for test, was in before.items():
        now = after.get(test)
        if was.status == "passed" and (now is None or now.status not in ("passed",)):
            summary.cpu_regressions[test] = (
                now.message if now is not None else "not run (its class did not collect)"
            )
    summary.gated_outcomes = dict(gated)
    summary.still_skipped = dict(still)
    summary.cuda_only_tests = dict(new)
    return summary


def _print(summary: Summary) -> None:
    s = summary
    print(f"{s.project} {s.version}: {', '.join(MODULES)}")
    print(
        f"  without a GPU: {s.tests_before} tests, {s.passed_before} passed, "
        f"{s.skipped_before} skipped "
        f"({s.seconds.get('before', 0):.0f} s)"
    )
    print(f"  with --sim-gpu {s.gpu} ({s.seconds.get('after', 0):.0f} s):")
    print(f"    of the skipped tests, {s.gpu_gated} ran: {s.gated_outcomes}")
    print(f"    still skipped (not about CUDA): {s.still_skipped}")
    print(f"    tests that exist only with CUDA available: {s.cuda_only_tests}")
    for collector, error in s.collection_errors.items():
        print(f"    {collector} did not collect: {error}")
    if s.failures:
        print("  failures of GPU tests (first error line):")
        for test, message in sorted(s.failures.items()):
            print(f"    {test}: {message}")
    print(
        f"  tests that passed without a GPU but not under --sim-gpu: {len(s.cpu_regressions)} "
        f"of {s.passed_before}"
    )
    for test, message in sorted(s.cpu_regressions.items())[:40]:
        print(f"    {test}: {message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", default="H100", help="the simulated GPU (--sim-gpu)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--data-from",
        metavar="CHECKOUT",
        help="a checkout of skorch's repository at the same version: copy the test data files "
        "its wheel lacks (checkpoints saved on a real GPU) into the scratch directory",
    )
    args = parser.parse_args(argv)
    try:
        version = metadata.version(PROJECT)
    except metadata.PackageNotFoundError:
        print(
            f"skipped: {PROJECT} is not installed; `pip install -e '.[dev]'` installs "
            f"{PROJECT}=={VERSION} with its test dependencies."
        )
        return 0
    if version != VERSION:
        print(f"note: {PROJECT} {version} is installed; the README's numbers are for {VERSION}.")
    # node ids relative to the installed package's parent: skorch/tests/test_net.py::...
    rootdir = os.path.dirname(os.path.dirname(importlib.util.find_spec(PROJECT).origin or ""))
    with tempfile.TemporaryDirectory(prefix="external-gpu-tests-") as tmp:
        data = os.path.join(tmp, "skorch", "tests")  # where skorch's tests read and write
        os.makedirs(data)
        if args.data_from:
            for name in _DATA_FILES:
                shutil.copy(os.path.join(args.data_from, "skorch", "tests", name), data)
        seconds = {}
        out = {}
        for label, extra in (("before", []), ("after", ["--sim-gpu", args.gpu])):
            out[label] = os.path.join(tmp, f"{label}.json")
            seconds[label] = run_pytest(extra, out[label], tmp, rootdir)
        before, _ = read_outcomes(out["before"])
        after, after_collection = read_outcomes(out["after"])
    summary = compare(before, after, after_collection, args.gpu, version)
    summary.seconds = seconds
    if args.json:
        print(json.dumps(asdict(summary), indent=2))
    else:
        _print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
