"""Everyday CUDA behaviours nobody listed, each run under `torchplace sim --gpu H100`.

Every script in a set's folder (benchmarks/unlisted/, the first set; benchmarks/unlisted2/,
a second set written later without reading the simulator) states in its docstring one
behaviour a PyTorch user relies on, asserts what a real GPU does (each expectation cites its
source in a comment) and exits 0 when the simulated GPU behaves the same. A header line `#
gpus: 2` asks for two simulated GPUs. This runner runs each script on each torch build,
prints pass/fail per script and the rate, and with --json writes the results as JSON.

    python benchmarks/unlisted_behaviours.py                 # first set, both builds, 2 at a time
    python benchmarks/unlisted_behaviours.py --build cpu -k mem_
    python benchmarks/unlisted_behaviours.py --set unlisted2  # the second set
    python benchmarks/unlisted_behaviours.py --set all        # both sets
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
SETS = {"unlisted": HERE / "unlisted", "unlisted2": HERE / "unlisted2"}
BUILDS = {
    "cpu": ROOT / ".venv" / "bin" / "python",
    "cuda": Path("/work/main/.venv-cuda/bin/python"),
}
GPUS = re.compile(r"^# gpus: (\d+)$", re.MULTILINE)


@dataclass
class Result:
    build: str
    set: str
    script: str
    gpus: int
    passed: bool
    seconds: float
    reason: str


def gpus_of(script: Path) -> int:
    found = GPUS.search(script.read_text())
    return int(found.group(1)) if found else 1


def last_error_line(text: str) -> str:
    """The exception line of a traceback (or the last line) from the script's stderr."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception|Exit|Warning)\b.*:", line) or line.startswith(
            ("AssertionError", "SystemExit")
        ):
            return line[:300]
    return lines[-1][:300] if lines else "(no output)"


def run_one(
    build: str, python: Path, script: Path, gpu: str, values: str, timeout: float
) -> Result:
    gpus = gpus_of(script)
    cmd = ["nice", "-n", "10", str(python), "-m", "torchplace", "sim", "--gpu", gpu]
    cmd += ["--gpus", str(gpus), "--values", values, "--json", str(script)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        reason = f"timed out after {timeout:.0f} s"
        return Result(build, script.parent.name, script.stem, gpus, False, timeout, reason)
    seconds = time.monotonic() - start
    passed = proc.returncode == 0
    reason = (
        "" if passed else f"exit {proc.returncode}: {last_error_line(proc.stderr or proc.stdout)}"
    )
    return Result(build, script.parent.name, script.stem, gpus, passed, round(seconds, 1), reason)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--build", choices=["cpu", "cuda", "both"], default="both", help="torch build(s) to run on"
    )
    parser.add_argument(
        "--cpu-python", type=Path, default=BUILDS["cpu"], help="python of the 2.13 CPU build"
    )
    parser.add_argument(
        "--cuda-python", type=Path, default=BUILDS["cuda"], help="python of the CUDA build"
    )
    parser.add_argument("--gpu", default="H100", help="simulated GPU model (default H100)")
    parser.add_argument("--values", default="auto", choices=["auto", "real", "placeholder"])
    parser.add_argument("--jobs", type=int, default=2, help="simulations at a time (default 2)")
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds per script (default 180)"
    )
    parser.add_argument(
        "--set",
        dest="sets",
        choices=[*SETS, "all"],
        default="unlisted",
        help="which set of scripts: unlisted (the first, default), unlisted2, or all",
    )
    parser.add_argument(
        "-k", dest="pattern", default="", help="only scripts whose name contains this"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)

    wanted = args.pattern.split(",")
    folders = list(SETS.values()) if args.sets == "all" else [SETS[args.sets]]
    scripts = [
        p for f in folders for p in sorted(f.glob("*.py")) if any(w in p.stem for w in wanted)
    ]
    pythons = {"cpu": args.cpu_python, "cuda": args.cuda_python}
    builds = ["cpu", "cuda"] if args.build == "both" else [args.build]
    missing = [b for b in builds if not pythons[b].exists()]
    for b in missing:
        print(f"skipping the {b} build: no python at {pythons[b]}", file=sys.stderr)
    builds = [b for b in builds if b not in missing]
    if not scripts or not builds:
        print("nothing to run", file=sys.stderr)
        return 2

    jobs = [(b, pythons[b], s) for b in builds for s in scripts]
    start = time.monotonic()
    results: list[Result] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [
            pool.submit(run_one, b, py, s, args.gpu, args.values, args.timeout) for b, py, s in jobs
        ]
        for future in futures:
            r = future.result()
            results.append(r)
            mark = "pass" if r.passed else "FAIL"
            name = f"{r.set}/{r.script}" if args.sets == "all" else r.script
            print(f"{r.build:4}  {mark}  {name:40} {r.seconds:6.1f} s  {r.reason}", flush=True)

    summary = {}
    for b in builds:
        mine = [r for r in results if r.build == b]
        passed = sum(r.passed for r in mine)
        summary[b] = {"passed": passed, "total": len(mine), "rate": round(passed / len(mine), 4)}
        print(f"{b} build: {passed}/{len(mine)} pass ({100 * passed / len(mine):.1f}%)")
    wall = time.monotonic() - start
    print(
        f"wall {wall:.0f} s, --set {args.sets}, --jobs {args.jobs}, --gpu {args.gpu},"
        f" --values {args.values}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "set": args.sets,
                    "gpu": args.gpu,
                    "values": args.values,
                    "wall_s": round(wall, 1),
                    "summary": summary,
                    "results": [asdict(r) for r in results],
                },
                indent=1,
            )
        )
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
