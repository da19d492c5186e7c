"""Run the real-program corpus (tests/programs) under ``torchplace sim`` and print a table.

Each program follows a public program's pattern and checks what a GPU run would satisfy
(see tests/test_programs.py); this runs all of them, heavy ones included, one process each,
and prints program → result, wall seconds, simulated peak allocated, then the count passing.
A known failure (``EXPECT["xfail"]``) counts as failing, with its reason. ``--issue88``
compares nanogpt_issue88.py's simulated out-of-memory with the figures quoted in
karpathy/nanoGPT issue #88.

Usage: ``.venv/bin/python benchmarks/programs.py [-k NAME] [--issue88]``; with another
torch build, run that environment's interpreter (``.venv-cuda/bin/python ...``).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "conformance"))
import run as conformance  # noqa: E402

import test_programs  # noqa: E402

GIB = 1024**3
# CUDA's message: "Tried to allocate 6.14 GiB" and, since torch 2.1, "Of the allocated
# memory 10.02 GiB is allocated by PyTorch" (before: "10.16 GiB already allocated")
ISSUE88 = {"tried": 6.14, "allocated": 10.16}


def _gib(text: str, pattern: str) -> float | None:
    m = re.search(pattern + r" ([\d.]+) (GiB|MiB)", text)
    if m is None:
        return None
    return float(m.group(1)) / (1024 if m.group(2) == "MiB" else 1)


def issue88() -> int:
    case = conformance.load(ROOT / "tests" / "programs" / "nanogpt_issue88.py")
    code, report, _ = conformance.simulate(case, "placeholder")
    message = (report.get("error") or {}).get("message", "")
    got = {
        "tried": _gib(message, "Tried to allocate"),
        "allocated": _gib(message, "Of the allocated memory"),
    }
    print(f"nanoGPT #88 (train.py --batch_size=32, {report.get('gpu', {}).get('name')}):")
    print(f"{'':22} {'issue':>10} {'simulated':>10} {'diff':>8}")
    for key, label in (("tried", "tried to allocate"), ("allocated", "already allocated")):
        sim = got[key]
        if sim is None:
            print(f"{label:22} {ISSUE88[key]:>8.2f} G {'—':>10}  (no out-of-memory: exit {code})")
            return 1
        diff = (sim - ISSUE88[key]) / ISSUE88[key] * 100
        print(f"{label:22} {ISSUE88[key]:>8.2f} G {sim:>8.2f} G {diff:>+7.1f}%")
    return 0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only programs whose name contains this")
    parser.add_argument("--issue88", action="store_true", help="only the nanoGPT #88 figures")
    args = parser.parse_args(argv)
    import torch

    print(f"torch {torch.__version__} ({'CUDA' if torch.version.cuda else 'CPU'} build)")
    if args.issue88:
        return issue88()
    # one fresh process per program, so its CPU time is measured (steadier than wall time
    # on a shared machine)
    os.environ["TORCHPLACE_CONFORMANCE_FORK"] = "0"
    passed = total = 0
    print(f"{'program':32} {'result':8} {'wall s':>7} {'CPU s':>6} {'peak':>10}  notes")
    for case in test_programs.programs():
        if args.k not in case.name:
            continue
        start, cpu_start = time.perf_counter(), _children_cpu()
        code, report, _ = conformance.simulate(case, case.modes[0])
        wall, cpu = time.perf_counter() - start, _children_cpu() - cpu_start
        found = conformance.check(case, code, report)
        if report and code == 0 and not found:
            found = test_programs.sanity(report)
        total += 1
        passed += not found
        reports = [report] + [p["report"] for p in report.get("processes", []) if p.get("report")]
        peaks = [d["peak_allocated_bytes"] for r in reports for d in r.get("devices", [])]
        peak = max(peaks, default=0)
        note = f"known failure: {case.expect['xfail']}" if "xfail" in case.expect else ""
        if found and not note:
            note = found[0][:120]
        result = "pass" if not found else "FAIL"
        print(f"{case.name:32} {result:8} {wall:7.1f} {cpu:6.1f} {peak / GIB:8.3f} G  {note}")
    print(f"{passed}/{total} programs behave as on a GPU")
    return 0 if passed == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
