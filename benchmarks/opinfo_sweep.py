"""PyTorch's OpInfo samples on a simulated GPU, against what CUDA's own host code does.

Every (operator, dtype, sample) of ``op_db`` that ``tools/gen_cuda_ops.py`` ran on a CUDA
build of the same torch minor version (host code only: see that script) runs here on a
simulated H100 with real values, and the outcomes are compared
(``benchmarks/data/opinfo-cuda-<version>.json.gz`` holds CUDA's):

1. supported pairs, (operator, dtype) pairs CUDA runs: every sample runs, and its outputs
   have the device, dtype and shape CUDA gave them (where CUDA's host code handed the work
   to cuBLAS or a kernel that cannot run without a GPU, CUDA's shapes are unknown and
   running counts);
2. unsupported pairs, those CUDA refuses on every sample: the simulation raises the same
   exception type on every sample (the count with the same text too is shown);
3. device mixing: each operator's first runnable sample with one of its first four tensors
   left on the host, the rest on the GPU: the simulation raises where CUDA raises (same
   type) and runs where CUDA runs.

Each sample is compared with CUDA's outcome for the same call (matched by
``opinfo_cases.fingerprint``: shapes, strides and arguments), and the script runs itself
with ``PYTHONHASHSEED`` set as the generator does: some OpInfo sample functions iterate
over a set of strings, whose order, and so the values drawn for each sample, follows the
process's string hashing.

What the simulator refuses by design is counted apart, not as a match or a difference:
an exception whose text says so ("not simulated: ...", as for ``torch.cuda.jiterator``,
which compiles CUDA C++ at run time, or "torchplace sim does not simulate sparse
tensors") on any sample of a pair, or in a mixing case, puts it in the column "refused
plainly, by design", listed; each measure's rate is over the cases that are simulated.

A sample CUDA's host code handed to a library for a dtype OpInfo says CUDA lacks (integer
convolutions in cuDNN, half-precision linear algebra in cuSOLVER), or whose outcome followed
a read of values no kernel computed (a value check in the operator's own host code), is not
decided without a GPU and is skipped; a pair with no decided sample is counted apart ("not
decided without a GPU"). Every remaining difference is printed with what each side did.

Run (the whole, several minutes; ``--every 12`` is the bounded part CI runs)::

    .venv/bin/python benchmarks/opinfo_sweep.py [--every N] [--only NAME ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import torch  # noqa: E402
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack  # noqa: E402

import opinfo_cases as cases  # noqa: E402  (tools/, shared with the generator)
from torchplace.sim import simulate  # noqa: E402
from torchplace.sim.emulation._modes import SimDispatchMode  # noqa: E402

_FILE = re.compile(r"opinfo-cuda-(\d+)\.(\d+)\.json\.gz$")
#: the simulator's plain refusals of what it does not simulate, by design (issue 23 item 4)
_PLAIN = re.compile(r"^(not simulated: |torchplace sim does not simulate )")


def refused_plainly(err: BaseException | None) -> bool:
    """Whether ``err`` is the simulator's plain refusal of something it does not simulate."""
    return err is not None and bool(_PLAIN.match(str(err)))


def truth_path(version: str | None = None) -> Path:
    """The ground truth for ``version`` (the installed torch's): its minor version's file,
    else the nearest one's."""
    major, minor = (int(p) for p in (version or torch.__version__).split(".")[:2])
    found = {
        (int(m[1]), int(m[2])): p
        for p in (ROOT / "benchmarks" / "data").glob("opinfo-cuda-*.json.gz")
        if (m := _FILE.search(p.name))
    }
    if not found:
        raise SystemExit(
            "error: no benchmarks/data/opinfo-cuda-*.json.gz; run tools/gen_cuda_ops.py"
        )
    best = min(found, key=lambda v: (abs((v[0] - major) * 100 + v[1] - minor), v))
    return found[best]


def load_truth(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return data


@dataclass
class Tally:
    """Passes and cases of one measure, and its differences."""

    passed: int = 0
    total: int = 0
    exact_text: int = 0
    differences: list[str] = field(default_factory=list)

    def add(self, ok: bool, what: str, exact: bool = False) -> None:
        self.total += 1
        self.passed += ok
        self.exact_text += ok and exact
        if not ok:
            self.differences.append(what)

    def rate(self) -> float:
        return 100.0 * self.passed / self.total if self.total else 100.0


#: aten operators whose CUDA kernels hand the work to a CUDA library: cuBLAS's products
#: (aten/src/ATen/native/cuda/Blas.cpp) and cuSOLVER's or MAGMA's decompositions
#: (aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp). Without a device the
#: generator's run stops at the first one ("device"): what CUDA checks after it is not seen.
_LIBRARY = re.compile(
    r"aten::(mm|addmm|bmm|baddbmm|addbmm|addmv|mv|dot|vdot|_?linalg_\w+|_scaled_mm)"
)


def _raised_past_a_library(op: Any, sample: Any, host: int) -> bool:
    """Whether the simulation raised only after the call reached a CUDA library, where the
    generator's run without a device stopped ("device"): the two agree on all that CUDA's
    run saw, and CUDA's outcome beyond it is unknown. The operators the call ran are those
    the simulation's dispatch mode hands its cost model (``on_op``), composites' inner ones
    included."""
    mode = next(m for m in _get_current_dispatch_mode_stack() if isinstance(m, SimDispatchMode))
    ran: list[str] = []
    priced = mode.on_op

    def record(func: Any, *rest: Any) -> None:
        ran.append(func._schema.name)
        if priced is not None:
            priced(func, *rest)

    mode.on_op = record
    try:
        _, err = _run(op, sample, host)
    finally:
        mode.on_op = priced
    return err is not None and any(_LIBRARY.fullmatch(name) for name in ran)


def _run(op: Any, sample: Any, host: int | None = None) -> tuple[Any, Any]:
    """The sample moved to the simulated GPU (but its ``host``-th tensor) and run:
    (outputs' [shape, dtype, device], None) or (None, the exception)."""
    try:
        return cases.outputs(cases.call(op, cases.moved(sample, "cuda", host))), None
    except Exception as e:
        return None, e


def _describe(out: Any, err: Exception | None) -> str:
    if err is not None:
        first = str(err).split("\n", 1)[0][:160]
        return f"raised {type(err).__name__}: {first}"
    return f"ran: {out}"


def _same_outputs(expected: Any, got: Any) -> bool:
    return expected is None or got == expected


def sweep(
    truth: dict[str, Any], *, every: int = 1, only: list[str] | None = None
) -> dict[str, Tally]:
    """Run the cases on a simulated H100 and tally the three measures."""
    keys = ("supported", "unsupported", "mixing", "unknown", "unmatched", "refused", "beyond")
    tallies = {k: Tally() for k in keys}
    ops = [op for op in cases.ops() if cases.key(op) in truth["ops"]]
    ops = sorted(ops, key=cases.key)
    ops = [op for op in ops if op.name in only or cases.key(op) in only] if only else ops[::every]
    with simulate("H100", values="real"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ops:
            info = truth["ops"][cases.key(op)]
            for dtype, outcomes in info["samples"].items():
                if dtype not in cases.DTYPES or not outcomes:
                    continue
                _pair(op, dtype, outcomes, info, tallies)
            for mixing in info.get("mixing", ()):
                parts = ("mixing", "unmatched", "refused", "beyond")
                _mixing(op, mixing, *(tallies[k] for k in parts))
    return tallies


def _pair(
    op: Any, dtype: str, outcomes: list[Any], info: dict[str, Any], tallies: dict[str, Tally]
) -> None:
    """One (operator, dtype): supported if CUDA ran a sample, unsupported if it raised on
    every sample it decided; each decided sample must go as on CUDA."""
    name = f"{cases.key(op)} {dtype}"
    results = [o["result"] for o in outcomes]
    if any(r in ("ok", "device") for r in results):
        tally = tallies["supported"]
    elif any(isinstance(r, list) for r in results):
        tally = tallies["unsupported"]
    else:  # CUDA's host code handed every sample to a library OpInfo says refuses it
        tallies["unknown"].add(True, name)
        return
    try:
        samples = cases.samples(op, dtype)
    except Exception as e:  # the generator made them: a difference of the sample code
        tally.add(False, f"{name}: no samples ({e})")
        return
    good, exact, why = True, True, ""
    for k, (sample, want) in enumerate(_matched(samples, outcomes, tallies["unmatched"], name)):
        result = want["result"]
        if result == "unknown":
            continue
        out, err = _run(op, sample)
        if refused_plainly(err):
            tallies["refused"].add(False, f"{name} sample {k}: {_describe(out, err)}")
            return
        if isinstance(result, list):
            if err is None or type(err).__name__ != result[0]:
                good, why = (
                    False,
                    f"sample {k}: {_describe(out, err)}; CUDA raised {result[0]}: {result[1]}",
                )
                break
            exact = exact and _first_line(err) == result[1]
        elif err is not None or not _same_outputs(want.get("out"), out):
            good, why = False, f"sample {k}: {_describe(out, err)}; CUDA ran: {want.get('out')}"
            break
    tally.add(good, f"{name} {why}", exact)


def _matched(
    samples: list[Any], outcomes: list[Any], unmatched: Tally, name: str
) -> list[tuple[Any, Any]]:
    """Each sample with CUDA's outcome for the same call: the next unused outcome of its
    fingerprint (``opinfo_cases.fingerprint``; by position in data made without them). A
    sample CUDA's data lacks (a process that made them in another order, and picked
    others: see ``opinfo_cases.HASH_SEED``) is counted apart, not compared."""
    if not any("id" in o for o in outcomes):
        return list(zip(samples, outcomes, strict=False))
    left = list(outcomes)
    pairs = []
    for k, sample in enumerate(samples):
        fp = cases.fingerprint(sample)
        found = next((o for o in left if o.get("id") == fp), None)
        if found is None:
            unmatched.add(False, f"{name} sample {k}: not in CUDA's data")
            continue
        left.remove(found)
        pairs.append((sample, found))
    return pairs


def _first_line(err: Exception) -> str:
    return str(err).split("\n", 1)[0][:500]


def _mixing(
    op: Any, mixing: dict[str, Any], tally: Tally, unmatched: Tally, refused: Tally, beyond: Tally
) -> None:
    try:
        made = cases.samples(op, mixing["dtype"])
    except Exception as e:
        for case in mixing["cases"]:
            tally.add(False, f"{cases.key(op)} host={case['host']}: no sample ({e})")
        return
    if mixing.get("id") is None:
        sample = made[mixing["sample"]]
    else:
        sample = next((s for s in made if cases.fingerprint(s) == mixing["id"]), None)
        if sample is None:
            unmatched.add(False, f"{cases.key(op)} mixing sample {mixing['sample']}: not made here")
            return
    for case in mixing["cases"]:
        want, host = case["result"], case["host"]
        if want in ("values", "unknown"):
            continue  # CUDA raised after reading values no kernel computed: undecided
        out, err = _run(op, sample, host)
        where = f"{cases.key(op)} {mixing['dtype']} sample {mixing['sample']} host={host}"
        if refused_plainly(err):
            refused.add(False, f"[mixing] {where}: {_describe(out, err)}")
        elif want == "device" and err is not None and _raised_past_a_library(op, sample, host):
            beyond.add(False, f"{where}: {_describe(out, err)}")
        elif want in ("ok", "device"):
            ok = err is None and (case["out"] is None or out == case["out"])
            tally.add(ok, f"{where}: {_describe(out, err)}; CUDA ran: {case['out']}")
        else:
            ok = err is not None and type(err).__name__ == want[0]
            exact = ok and err is not None and _first_line(err) == want[1]
            tally.add(
                ok, f"{where}: {_describe(out, err)}; CUDA raised {want[0]}: {want[1]}", exact
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--every", type=int, default=1, help="every N-th operator (sorted by name)")
    parser.add_argument("--only", nargs="*", help="these operators (OpInfo names)")
    parser.add_argument("--json", type=Path, help="also write the tallies here")
    args = parser.parse_args(argv)  # (--help and bad options before the restart below)
    if argv is None and os.environ.get("PYTHONHASHSEED") != cases.HASH_SEED:
        os.environ["PYTHONHASHSEED"] = cases.HASH_SEED  # the generator's sample order
        os.execv(sys.executable, [sys.executable, *sys.argv])
    path = truth_path()
    truth = load_truth(path)
    began = time.monotonic()
    tallies = sweep(truth, every=args.every, only=args.only)
    seconds = time.monotonic() - began
    print(
        f"OpInfo sweep: torch {torch.__version__} against CUDA {truth['torch']} "
        f"({path.relative_to(ROOT)}), simulated H100, real values, {seconds:.0f} s"
    )
    labels = {
        "supported": "supported pairs (right device, dtype, shape)",
        "unsupported": "unsupported pairs (raise as CUDA does)",
        "mixing": "device mixing (raise or run as CUDA does)",
    }
    for key, label in labels.items():
        t = tallies[key]
        extra = f"; same text {t.exact_text}" if key != "supported" else ""
        print(f"  {label:46} {t.passed:5}/{t.total:<5} {t.rate():6.2f} %{extra}")
    plain = tallies["refused"].differences
    print(
        f"  refused plainly, by design (not simulated; not in the rates above): "
        f"{sum(not d.startswith('[mixing]') for d in plain)} pairs, "
        f"{sum(d.startswith('[mixing]') for d in plain)} mixing cases"
    )
    print(
        f"  not decided without a GPU: {tallies['unknown'].total} pairs (CUDA's host code hands "
        "them to a library OpInfo says refuses their dtype, or decides them by values no "
        "kernel computed)"
    )
    if tallies["beyond"].total:
        print(
            f"  mixing cases not decided without a GPU: {tallies['beyond'].total} (CUDA's run "
            "stopped at a library call, and the simulation raised after it)"
        )
    if tallies["unmatched"].total:
        print(
            f"  samples not compared: {tallies['unmatched'].total} (made in another order than "
            f"CUDA's: run with PYTHONHASHSEED={cases.HASH_SEED})"
        )
    for key, t in tallies.items():
        if key in ("unmatched", "refused"):
            continue
        if key == "beyond":
            key = "past a library"
        for line in t.differences:
            print(f"[{key}] {line}")
    for line in plain:
        print(f"[refused plainly] {line.removeprefix('[mixing] ')}")
    if args.json:
        summary = {
            k: {"passed": t.passed, "total": t.total, "exact_text": t.exact_text,
                "differences": t.differences}
            for k, t in tallies.items()
        }  # fmt: skip
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
