"""Run the CUDA conformance cases under ``torchplace sim`` and check them.

Each case (``cases/*.py``) is a small PyTorch script whose docstring says what a real CUDA
GPU does and where that is documented (torch's own source, its docs, or an issue thread
quoting the error). The script checks the behaviour with plain ``assert`` statements, so
it runs unchanged on a real GPU (``--gpu-run``), and ends with an ``EXPECT`` literal: what
the simulator's JSON report must say (read here with ``ast.literal_eval``, never run).

``EXPECT`` keys (all optional):

- ``gpu``, ``gpus``, ``options``, ``env``, ``args``: how to run it (``torchplace sim``
  options, more of them as a list, the environment, the script's arguments); ``values``: the value modes to run it in
  (default ``["real", "placeholder"]``); ``sim_only``: it checks the simulator itself,
  so ``--gpu-run`` skips it (say why in the docstring).
- ``exit``: the exit code (default 0).
- ``error``: ``{"type": ..., "message": regex (full match), "line": N}`` — the uncaught
  error the report names, at the script's line ``N``. A line may also be given as the
  start of its source text (``"line": "y = x + z"``), which must match exactly one line.
- ``transfers``: ``{"h2d": {"count": N, "bytes": B}, ...}`` (the keys given must match).
- ``syncs``: ``[{"kind": ..., "line": N, "count": C}, ...]`` — each must be reported;
  ``no_syncs``: the report lists none.
- ``notes``: regexes, each matching a note of the report.
- ``peak_allocated``: ``{device: bytes}``.
- ``processes``: how many child processes the report lists, each without an error.
- ``needs``: what a real machine must have for ``--gpu-run`` (and benchmarks/gpu_diff.py)
  to run the case: ``{"gpus": N, "gpu": NAME or [NAMES], "capability": [major, minor]}``.
  Without it a case needs its ``gpus`` and, when it names a ``gpu``, that card (its claims
  are that card's). Elsewhere it is skipped with the reason, not failed.

``--gpu-run`` runs each case as a plain script through record.py, which records the
uncaught error with the case's line it passed through last (errors raised inside torch
included), then checks ``exit`` and ``error`` as for a simulation; each case sees as many
GPUs as it needs (``CUDA_VISIBLE_DEVICES``), as its simulation does.

Usage: ``python tests/conformance/run.py [--python PATH] [--gpu-run] [-k NAME]`` prints
one line per case and the count; ``tests/test_conformance.py`` runs the same checks.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import functools
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
CASES = Path(__file__).parent / "cases"
RECORDER = Path(__file__).parent / "record.py"
RECORD_ENV = "TORCHPLACE_RECORD"  # record.py writes its JSON there
_ENV_DROP = ("TORCHPLACE_DEVICE", "COLUMNS", "CUDA_VISIBLE_DEVICES")


@dataclass
class Case:
    path: Path
    expect: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def modes(self) -> list[str]:
        return list(self.expect.get("values", ["real", "placeholder"]))

    @property
    def needs(self) -> dict[str, Any]:
        """What a real machine must have to run the case (the ``needs`` key, see above)."""
        e = self.expect
        gpus = max([e.get("gpus", 1)] + [int(n) for n in _option(e, "--nproc-per-node")])
        if "needs" in e:
            return {"gpus": gpus, **e["needs"]}
        return {"gpus": gpus, **({"gpu": e["gpu"]} if "gpu" in e else {})}


def _option(expect: dict[str, Any], flag: str) -> list[str]:
    """The values a ``torchplace sim`` option takes in ``expect["options"]``."""
    options = expect.get("options", [])
    return [v for k, v in itertools.pairwise(options) if k == flag]


@dataclass(frozen=True)
class Machine:
    """The CUDA GPUs a real run sees: each one's name and compute capability."""

    names: tuple[str, ...]
    capabilities: tuple[tuple[int, int], ...]
    visible: tuple[str, ...] = ()  # CUDA_VISIBLE_DEVICES of the harness, split

    def visible_devices(self, n: int) -> str:
        """CUDA_VISIBLE_DEVICES for a run that should see the first ``n`` of them."""
        ids = list(self.visible) or [str(i) for i in range(len(self.names))]
        return ",".join(ids[:n])


_PROBE = (
    "import json, torch\n"
    "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
    "print(json.dumps([[torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i)]"
    " for i in range(n)]))"
)


def machine(python: str = sys.executable) -> Machine:
    """The real GPUs ``python`` sees (the one hardware query; tests patch it)."""
    r = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"could not ask {python} for its GPUs: {r.stderr[-2000:]}")
    found = json.loads(r.stdout.strip().splitlines()[-1])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return Machine(
        names=tuple(name for name, _ in found),
        capabilities=tuple((int(cc[0]), int(cc[1])) for _, cc in found),
        visible=tuple(v.strip() for v in visible.split(",") if v.strip()),
    )


def skip_reason(case: Case, on: Machine) -> str | None:
    """Why ``case`` cannot run as a plain script on ``on`` (None when it can)."""
    from torchplace import catalog

    if case.expect.get("sim_only"):
        return "checks the simulator itself"
    needs = case.needs
    if len(on.names) < needs["gpus"]:
        return f"needs {needs['gpus']} GPUs; this machine has {len(on.names)}"
    cards = needs.get("gpu", [])
    cards = [cards] if isinstance(cards, str) else cards
    if cards:
        keys = {catalog.lookup(c).key for c in cards}
        try:
            here = catalog.lookup(on.names[0]).key
        except ValueError:
            here = None
        if here not in keys:
            return f"written for {' or '.join(cards)}; this machine has {on.names[0]}"
    capability = tuple(needs.get("capability", (0, 0)))
    if on.capabilities[0] < capability:
        return (
            f"needs compute capability {capability[0]}.{capability[1]}; this machine's is "
            f"{on.capabilities[0][0]}.{on.capabilities[0][1]}"
        )
    return None


def load(path: Path, *, source: bool = True) -> Case:
    """Read a case's ``EXPECT`` literal without running the case; ``source``: its docstring
    must name a ``Source:``."""
    tree = ast.parse(path.read_text(), str(path))
    expect: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "EXPECT" for t in node.targets
        ):
            expect = ast.literal_eval(node.value)
    if source and "Source:" not in (ast.get_docstring(tree) or ""):
        raise ValueError(f"{path.name}: the docstring must say what a GPU does and its Source:")
    return Case(path, expect)


def line_number(case: Case, line: int | str) -> int:
    """A line given by number or by the start of its (stripped) source text."""
    if isinstance(line, int):
        return line
    found = [
        n
        for n, text in enumerate(case.path.read_text().splitlines(), 1)
        if text.strip().startswith(line)
    ]
    if len(found) != 1:
        raise ValueError(f"{case.name}: {line!r} matches lines {found}, not exactly one")
    return found[0]


def cases(pattern: str = "") -> list[Case]:
    return [load(p) for p in sorted(CASES.glob("*.py")) if pattern in p.stem]


def simulate(
    case: Case,
    values: str,
    python: str = sys.executable,
    *,
    gpu: str | None = None,
    record: Path | None = None,
) -> tuple[int, dict[str, Any], str]:
    """Run ``case`` under ``torchplace sim --json``: (exit code, report, stderr); ``gpu``
    replaces the case's card; ``record``: through record.py, which writes there."""
    e = case.expect
    cmd = [python, "-m", "torchplace", "sim", "--json", "--values", values, "--timeout", "240"]
    if gpu or "gpu" in e:
        cmd += ["--gpu", gpu or e["gpu"]]
    if "gpus" in e:
        cmd += ["--gpus", str(e["gpus"])]
    cmd += e.get("options", [])
    cmd += [*([str(RECORDER)] if record else []), str(case.path), *e.get("args", [])]
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
    env.update(e.get("env", {}))
    if record:
        env[RECORD_ENV] = str(record)
    if python == sys.executable and os.environ.get("TORCHPLACE_CONFORMANCE_FORK") != "0":
        code, stdout, stderr = _zygote().run(cmd[3:], env, str(CASES), 300)
    else:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=CASES)
        code, stdout, stderr = r.returncode, r.stdout, r.stderr
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        report = {}
    return code, report, stderr


@functools.cache
def _zygote() -> Any:
    """One process that has imported torch, forking a process per case (zygote.py); set
    TORCHPLACE_CONFORMANCE_FORK=0 to start each case as a fresh ``python -m torchplace``."""
    from zygote import Zygote

    zygote = Zygote()
    atexit.register(zygote.close)
    return zygote


def check(case: Case, code: int, report: dict[str, Any]) -> list[str]:
    """What in the report differs from the case's ``EXPECT`` (empty when it conforms)."""
    e = case.expect
    problems: list[str] = []
    if not report:
        return [f"no JSON report (exit {code})"]
    want_exit = e.get("exit", 0)
    if code != want_exit:
        problems.append(f"exit {code}, expected {want_exit}; error: {report.get('error')}")
    err = report.get("error")
    if "error" in e:
        want = e["error"]
        if err is None:
            problems.append(f"no error reported, expected {want}")
        else:
            if err["type"] != want["type"]:
                problems.append(f"error type {err['type']}, expected {want['type']}")
            if "message" in want and not re.fullmatch(want["message"], err["message"], re.S):
                problems.append(f"error message {err['message']!r} !~ {want['message']!r}")
            if "line" in want and (err.get("line"), Path(err.get("file") or "").name) != (
                line_number(case, want["line"]),
                case.path.name,
            ):
                problems.append(
                    f"error at {err.get('file')}:{err.get('line')}, expected line {want['line']}"
                )
    elif err is not None and want_exit == 0:
        problems.append(
            f"unexpected error {err['type']}: {err['message']} at line {err.get('line')}"
        )
    for kind, want in e.get("transfers", {}).items():
        got = report["transfers"].get(kind, {})
        for key, value in want.items():
            if got.get(key) != value:
                problems.append(f"transfers.{kind}.{key} = {got.get(key)}, expected {value}")
    syncs = [
        (s["kind"], s["line"], s["count"])
        for s in report.get("syncs", [])
        if s["file"].endswith(case.path.name)
    ]
    for want in e.get("syncs", []):
        if not any(
            k == want["kind"]
            and ln == line_number(case, want.get("line", ln))
            and c == want.get("count", c)
            for k, ln, c in syncs
        ):
            problems.append(f"sync {want} not reported; reported: {syncs}")
    if e.get("no_syncs") and report.get("syncs"):
        problems.append(f"expected no syncs, got {report['syncs']}")
    notes = [n["text"] for n in report.get("notes", [])]
    for pattern in e.get("notes", []):
        if not any(re.search(pattern, n) for n in notes):
            problems.append(f"no note matches {pattern!r}; notes: {notes}")
    if "processes" in e:
        procs = report.get("processes", [])
        if len(procs) != e["processes"]:
            problems.append(f"{len(procs)} process sections, expected {e['processes']}")
        for p in procs:
            err = (p.get("report") or {}).get("error")
            if p.get("exit_code") != 0 or err:
                problems.append(f"process {p.get('name')}: exit {p.get('exit_code')}, {err}")
    for index, want in e.get("peak_allocated", {}).items():
        got = report["devices"][int(index)]["peak_allocated_bytes"]
        if got != want:
            problems.append(f"cuda:{index} peak allocated {got}, expected {want}")
    return problems


def run_plain(
    case: Case, python: str, on: Machine, record: Path, *, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``case`` as a plain script through record.py (which writes to ``record``),
    seeing as many GPUs as it needs."""
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
    env["CUDA_VISIBLE_DEVICES"] = on.visible_devices(case.needs["gpus"])
    env.update(case.expect.get("env", {}))
    env[RECORD_ENV] = str(record)
    # a program simulated with --nproc-per-node N is started by torchrun on the GPUs
    launch = [f"--nproc-per-node={n}" for n in _option(case.expect, "--nproc-per-node")]
    launch = ["-m", "torch.distributed.run", *launch] if launch else []
    cmd = [python, *launch, str(RECORDER), str(case.path), *case.expect.get("args", [])]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=CASES)


def check_plain(case: Case, code: int, record: dict[str, Any]) -> list[str]:
    """What a plain run (its exit code and record.py's record) differs in from EXPECT."""
    want_exit = case.expect.get("exit", 0)
    problems = [] if code == want_exit else [f"exit {code}, expected {want_exit}"]
    if not record:
        return [*problems, "record.py wrote no record"]
    want, err = case.expect.get("error"), record.get("error")
    if want is None:
        if err is not None and want_exit == 0:
            problems.append(f"unexpected {err['type']}: {err['message']} at line {err['line']}")
        return problems
    if err is None:
        return [*problems, f"no error raised, expected {want}"]
    if err["type"] != want["type"]:
        problems.append(f"error type {err['type']}, expected {want['type']}")
    if "message" in want and not re.fullmatch(want["message"], err["message"], re.S):
        problems.append(f"error message {err['message']!r} !~ {want['message']!r}")
    if "line" in want and err["line"] != line_number(case, want["line"]):
        problems.append(f"error at line {err['line']}, expected line {want['line']}")
    return problems


def run_on_gpu(case: Case, python: str, on: Machine) -> list[str]:
    """Run ``case`` as a plain script (on a machine with CUDA GPUs) and check it."""
    with tempfile.TemporaryDirectory(prefix="torchplace-gpu-run-") as tmp:
        path = Path(tmp) / "record.json"
        r = run_plain(case, python, on, path)
        record = json.loads(path.read_text()) if path.exists() else {}
    problems = check_plain(case, r.returncode, record)
    return [*problems, r.stderr[-2000:]] if problems else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter with torchplace")
    parser.add_argument("--gpu-run", action="store_true", help="run the cases as plain scripts")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    args = parser.parse_args(argv)
    passed = total = 0
    on = machine(args.python) if args.gpu_run else None
    for case in cases(args.k):
        modes = ["gpu"] if args.gpu_run else case.modes
        why = skip_reason(case, on) if on is not None else None
        if why is not None:
            print(f"skip {case.name}: {why}")
            continue
        for mode in modes:
            total += 1
            if on is not None:
                problems = run_on_gpu(case, args.python, on)
            else:
                code, report, stderr = simulate(case, mode, args.python)
                problems = check(case, code, report)
                if problems and not report:
                    problems.append(stderr[-1500:])
            passed += not problems
            print(f"{'ok  ' if not problems else 'FAIL'} {case.name} [{mode}]")
            for p in problems:
                print(f"       {p}")
    print(f"{passed}/{total} passed")
    return 0 if passed == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
