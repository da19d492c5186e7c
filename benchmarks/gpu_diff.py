"""The simulator against a real GPU on the same machine: every conformance case and program.

Each item (tests/conformance/cases, tests/programs) runs twice through the same hook
(tests/conformance/record.py): as a plain script on this machine's GPU, and under
``torchplace sim --gpu <this GPU>`` (the card found in the catalog by the device's name).
The two runs are compared:

- the exception: type, text, and the script's line it passed through last; the exit code;
- the output: the text the script printed, numbers aside (CUDA's and the CPU's random streams
  differ, so values are compared for the largest relative difference, shown, not judged);
- memory: ``memory_allocated``, ``max_memory_allocated`` and ``memory_reserved`` of every
  device the script used, after each ``optimizer.step()`` and at the end.

An item that needs more GPUs, another card or a newer compute capability than this machine
has is skipped with the reason (tests/conformance/run.py ``needs``). The result is one JSON in
benchmarks/results/ (``gpu_diff-<card>-torch<version>.json``, committed when produced on a
GPU) and a table. ``--sim-only`` runs the simulated half alone (on any machine, as the card
``--gpu`` names); the real half is then marked as not run. ``--timing`` also runs the GPU
timing profiler (benchmarks/timing/profile_gpu.py) into the same folder.

Usage: ``python benchmarks/gpu_diff.py`` on a GPU machine (with ``PYTHONPATH=src`` where
torchplace is not installed); ``python benchmarks/gpu_diff.py --sim-only --gpu H100 -k mismatch``
anywhere.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))
import run as conformance  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
PROGRAMS = ROOT / "tests" / "programs"
PROFILER = ROOT / "benchmarks" / "timing" / "profile_gpu.py"
METRICS = ("allocated", "max_allocated", "reserved")
CLOSE = 0.05  # memory within 5% of the GPU's is "close"
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


# --------------------------------------------------------------------------- what to run


def items(pattern: str = "", *, programs: bool = True, heavy: bool = True) -> list[Any]:
    """The conformance cases, then the programs (``heavy`` ones too unless asked not to)."""
    found = list(conformance.cases(pattern))
    if programs:
        for path in sorted(PROGRAMS.glob("*.py")):
            if path.name.startswith("_") or pattern not in path.stem:
                continue
            case = conformance.load(path, source=False)
            if heavy or not case.expect.get("heavy"):
                found.append(case)
    return found


def kind(case: Any) -> str:
    return "program" if case.path.parent == PROGRAMS else "case"


# --------------------------------------------------------------------------- the two halves


def _half(code: int, record_path: Path, started: float, stderr: str) -> dict[str, Any]:
    record = json.loads(record_path.read_text()) if record_path.exists() else None
    return {
        "exit": code,
        "seconds": round(time.monotonic() - started, 2),
        "record": record,
        "stderr_tail": stderr[-1500:] if code != 0 or record is None else "",
    }


def run_real(case: Any, python: str, on: Any, tmp: Path) -> dict[str, Any]:
    """The item as a plain script on this machine's GPU(s)."""
    path, started = tmp / f"{case.path.stem}-real.json", time.monotonic()
    try:
        r = conformance.run_plain(case, python, on, path, timeout=400)
        return _half(r.returncode, path, started, r.stderr)
    except subprocess.TimeoutExpired:
        return _half(-9, path, started, "timed out after 400 s")


def run_sim(case: Any, gpu: str, tmp: Path) -> dict[str, Any]:
    """The item under ``torchplace sim --gpu GPU`` in its first value mode."""
    path, started = tmp / f"{case.path.stem}-sim.json", time.monotonic()
    try:
        code, report, stderr = conformance.simulate(case, case.modes[0], gpu=gpu, record=path)
    except subprocess.TimeoutExpired:
        return _half(-9, path, started, "timed out after 300 s")
    half = _half(code, path, started, stderr)
    half["values"] = case.modes[0]
    half["report_error"] = report.get("error")
    return half


# --------------------------------------------------------------------------- comparison


def compare_errors(real: dict[str, Any] | None, sim: dict[str, Any] | None) -> list[str]:
    """How the two uncaught exceptions differ (type, text, line); [] when alike."""
    if real is None or sim is None:
        return [] if real == sim else [f"exception: GPU {_err(real)}, simulated {_err(sim)}"]
    return [
        f"exception {key}: GPU {real[key]!r}, simulated {sim[key]!r}"
        for key in ("type", "message", "line")
        if real[key] != sim[key]
    ]


def _err(e: dict[str, Any] | None) -> str:
    return "none" if e is None else f"{e['type']} at line {e['line']}"


def compare_output(real: str, sim: str) -> dict[str, Any]:
    """The printed text with numbers blanked must match; the numbers' largest relative
    difference is measured (random streams and kernels differ between CUDA and the CPU)."""
    same_text = _NUMBER.sub("#", real) == _NUMBER.sub("#", sim)
    worst = None
    if same_text:
        pairs = zip(_NUMBER.findall(real), _NUMBER.findall(sim), strict=True)
        diffs = [
            abs(float(a) - float(b)) / max(abs(float(a)), abs(float(b)), 1e-12) for a, b in pairs
        ]
        worst = max(diffs, default=0.0)
    return {"same_text": same_text, "max_relative_difference": worst}


def compare_memory(real: list[dict[str, Any]], sim: list[dict[str, Any]]) -> dict[str, Any]:
    """Point by point (each optimizer step, then the end), device by device, the three
    metrics: how many are equal, the largest difference, and a verdict."""
    points = equal = 0
    worst: dict[str, Any] | None = None
    problems = []
    if [p["at"] for p in real] != [p["at"] for p in sim]:
        problems.append(f"{len(real)} points on the GPU, {len(sim)} simulated")
    for r, s in zip(real, sim, strict=False):
        for device in sorted(set(r["devices"]) | set(s["devices"])):
            got = s["devices"].get(device, dict.fromkeys(METRICS, 0))
            want = r["devices"].get(device, dict.fromkeys(METRICS, 0))
            for metric in METRICS:
                points += 1
                diff = got[metric] - want[metric]
                equal += diff == 0
                rel = abs(diff) / max(want[metric], 1)
                if diff and (worst is None or rel > worst["relative"]):
                    worst = {
                        "at": r["at"],
                        "device": int(device),
                        "metric": metric,
                        "gpu": want[metric],
                        "simulated": got[metric],
                        "relative": round(rel, 6),
                    }
    if problems or (worst is not None and worst["relative"] > CLOSE):
        verdict = "differs"
    else:
        verdict = "same" if worst is None else "close"
    return {
        "verdict": verdict,
        "points": points,
        "equal": equal,
        "worst": worst,
        "problems": problems,
    }


def compare(real: dict[str, Any], sim: dict[str, Any]) -> dict[str, Any]:
    """The two halves of one item: its verdict ("same", "close", "differs", "no record", or
    "skipped" when the GPU's Python lacks a module the item imports) and every difference."""
    a, b = real["record"], sim["record"]
    if a is None or b is None:
        missing = [n for n, r in (("the GPU run", a), ("the simulation", b)) if r is None]
        return {"verdict": "no record", "differences": [f"no record from {' and '.join(missing)}"]}
    if (a["error"] or {}).get("type") == "ModuleNotFoundError":  # e.g. no transformers there
        return {"verdict": "skipped", "reason": f"the GPU's Python: {a['error']['message']}"}
    differences = []
    if real["exit"] != sim["exit"]:
        differences.append(f"exit: GPU {real['exit']}, simulated {sim['exit']}")
    differences += compare_errors(a["error"], b["error"])
    output = compare_output(a.get("stdout", ""), b.get("stdout", ""))
    if not output["same_text"]:
        differences.append("output text differs")
    memory = compare_memory(a["steps"], b["steps"])
    if memory["verdict"] == "differs":
        worst = memory["worst"]
        differences += memory["problems"] or [
            f"memory: {worst['metric']} of cuda:{worst['device']} at {worst['at']}: "
            f"GPU {worst['gpu']:,} B, simulated {worst['simulated']:,} B"
        ]
    verdict = "differs" if differences else ("close" if memory["verdict"] == "close" else "same")
    return {"verdict": verdict, "differences": differences, "output": output, "memory": memory}


# --------------------------------------------------------------------------- the run


def _versions(python: str) -> dict[str, Any]:
    code = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"error: {python} cannot import torch:\n{r.stderr[-2000:]}")
    torch_version, cuda = json.loads(r.stdout.strip().splitlines()[-1])
    return {"torch": torch_version, "cuda": cuda}


def _card(name: str) -> str:
    """The catalog key of a GPU model, or exit saying why there is none."""
    from torchplace import catalog

    try:
        return catalog.lookup(name).key
    except ValueError as e:
        raise SystemExit(
            f"error: {e}\nhint: the GPU must be in torchplace's catalog to be simulated "
            "(src/torchplace/data/gpus.toml; `torchplace sim --list-gpus` lists it)"
        ) from None


def machine(args: argparse.Namespace) -> tuple[Any, str, dict[str, Any]]:
    """The GPUs the real half runs on (for ``--sim-only``, ``--gpus`` of the card ``--gpu``
    names), the card to simulate, and the versions that ran."""
    if args.sim_only:
        from torchplace import catalog

        key = _card(args.gpu)
        spec = catalog.lookup(key)
        capability = tuple(spec.compute_capability or (0, 0))
        on = conformance.Machine((spec.torch_name,) * args.gpus, (capability,) * args.gpus)
        return on, key, _versions(sys.executable)
    on = conformance.machine(args.python)
    if not on.names:
        raise SystemExit(
            f"error: {args.python} sees no CUDA GPU, so there is no real half to run.\n"
            "hint: run this on a GPU machine, or add --sim-only --gpu NAME for the simulated half"
        )
    return on, _card(on.names[0]), _versions(args.python)


def diff(args: argparse.Namespace) -> dict[str, Any]:
    """Run both halves of every item and compare them: the result as written to JSON."""
    os.environ["TORCHPLACE_CONFORMANCE_FORK"] = "0"  # one process per simulation: in parallel
    # the simulations compute on the CPU, --jobs at once: they share the cores (at least 2
    # threads each, as torch's CPU heuristics that count threads see on a GPU machine)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(2, (os.cpu_count() or 2) // args.jobs)))
    started = time.time()
    on, card, versions = machine(args)
    todo = items(args.k, programs=not args.quick, heavy=not args.no_heavy)
    skips = {c.name: conformance.skip_reason(c, on) for c in todo}
    runnable = [c for c in todo if skips[c.name] is None]
    with (
        tempfile.TemporaryDirectory(prefix="torchplace-gpu-diff-") as tmp,
        ThreadPoolExecutor(args.jobs) as cpus,
        ThreadPoolExecutor(args.gpu_jobs) as gpus,
    ):
        sims = {c.name: cpus.submit(run_sim, c, card, Path(tmp)) for c in runnable}
        reals = {} if args.sim_only else {
            c.name: gpus.submit(run_real, c, args.python, on, Path(tmp)) for c in runnable
        }  # fmt: skip
        rows = []
        for case in todo:
            row: dict[str, Any] = {"name": case.name, "kind": kind(case)}
            if skips[case.name] is not None:
                row.update(verdict="skipped", reason=skips[case.name])
            elif args.sim_only:
                row.update(verdict="sim only", real=None, sim=sims[case.name].result())
            else:
                real, sim = reals[case.name].result(), sims[case.name].result()
                row.update(real=real, sim=sim, **compare(real, sim))
            rows.append(row)
    return {
        "schema_version": 1,
        "mode": "sim-only" if args.sim_only else "gpu",
        "machine": {"gpus": list(on.names), **versions},
        "simulated_gpu": card,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "summary": dict(Counter(r["verdict"] for r in rows)),
        "items": rows,
    }


# --------------------------------------------------------------------------- output


def _outcome(half: dict[str, Any] | None) -> str:
    if half is None:
        return "not run"
    record = half["record"]
    if record is None:
        return f"exit {half['exit']}, no record"
    err = record["error"]
    return f"{err['type']} @{err['line']}" if err else f"exit {half['exit']}"


def _memory_cell(row: dict[str, Any]) -> str:
    memory = row.get("memory")
    if memory is None:
        return ""
    worst = memory["worst"]
    text = f"{memory['equal']}/{memory['points']} equal"
    return text + (f", worst {worst['relative']:.1%}" if worst else "")


def table(result: dict[str, Any]) -> str:
    """The result as a text table, one row per item, then the counts."""
    head = ("item", "verdict", "GPU", "simulated", "memory", "why")
    lines = []
    for row in result["items"]:
        why = row.get("reason") or "; ".join(row.get("differences", []))
        lines.append(
            (
                row["name"],
                row["verdict"],
                "" if row["verdict"] == "skipped" else _outcome(row.get("real")),
                "" if row["verdict"] == "skipped" else _outcome(row.get("sim")),
                _memory_cell(row),
                why[:110],
            )
        )
    widths = [max(len(str(r[i])) for r in [head, *lines]) for i in range(len(head) - 1)]
    out = [
        "  ".join(str(c).ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in [head, *lines]
    ]
    machine = result["machine"]
    counts = ", ".join(f"{n} {v}" for v, n in sorted(result["summary"].items()))
    out.append(
        f"{len(result['items'])} items on {', '.join(machine['gpus']) or 'no GPU'} "
        f"(torch {machine['torch']}, simulated as {result['simulated_gpu']}, "
        f"{result['mode']}): {counts}; {result['seconds']:.0f} s"
    )
    return "\n".join(out)


def default_out(result: dict[str, Any]) -> Path:
    """benchmarks/results/gpu_diff-<card>-torch<version>.json for a GPU run (committed);
    a temporary file for --sim-only, which measures nothing about a GPU."""
    torch_version = result["machine"]["torch"].split("+")[0]
    name = f"gpu_diff-{result['simulated_gpu']}-torch{torch_version}.json"
    if result["mode"] == "sim-only":
        return Path(tempfile.gettempdir()) / name.replace("gpu_diff-", "gpu_diff-sim-only-")
    return RESULTS / name


def write(result: dict[str, Any], path: Path) -> None:
    """Whole or not at all: a temporary file beside it, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)


def profiler() -> Callable[[Path, bool], Path]:
    """The timing engineer's GPU profiler's ``run(out_dir, quick)``, or exit saying so."""
    if not PROFILER.exists():
        raise SystemExit(
            f"error: --timing runs {PROFILER}, which this checkout does not "
            "have.\nhint: run without --timing, or on a checkout that has the timing profiler"
        )
    spec = importlib.util.spec_from_file_location("profile_gpu", PROFILER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run: Callable[[Path, bool], Path] = module.run
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-k", default="", help="only items whose name contains this")
    parser.add_argument(
        "--sim-only", action="store_true", help="the simulated half alone (any machine)"
    )
    parser.add_argument("--gpu", default="H100", help="with --sim-only: the card (default H100)")
    parser.add_argument(
        "--gpus", type=int, default=1, help="with --sim-only: how many of them (default 1)"
    )
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter for the plain GPU runs"
    )
    parser.add_argument("--quick", action="store_true", help="the conformance cases only")
    parser.add_argument("--no-heavy", action="store_true", help="leave out heavy programs")
    parser.add_argument(
        "--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
        help="simulations at once (default: half the CPUs)",
    )  # fmt: skip
    parser.add_argument(
        "--gpu-jobs", type=int, default=2, help="plain GPU runs at once (default 2)"
    )
    parser.add_argument("--out", type=Path, help="the JSON to write (default: see above)")
    parser.add_argument(
        "--timing", action="store_true", help="also run benchmarks/timing/profile_gpu.py"
    )
    args = parser.parse_args(argv)
    if args.gpus < 1 or args.jobs < 1 or args.gpu_jobs < 1:
        parser.error("--gpus, --jobs and --gpu-jobs take whole numbers >= 1")
    run_timing = profiler() if args.timing else None  # before the long part: fail early
    result = diff(args)
    if run_timing is not None:
        result["timing"] = str(run_timing(RESULTS, args.quick))
    out = args.out or default_out(result)
    write(result, out)
    print(table(result))
    print(f"written to {out}")
    return 0 if not {"differs", "no record"} & set(result["summary"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
