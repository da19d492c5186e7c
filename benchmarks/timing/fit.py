"""Fit the step-time model's fitted constants on the *fit* rows of published.csv.

Only what the model cannot derive is fitted (``fitted = true`` in
``src/torchplace/data/timemodel.toml``): the fraction of the tensor-core and SIMT peaks
large products reach, cuDNN's convolutions relative to them, the achievable fraction of
the memory bandwidth, the GPU's per-kernel overhead, and the host factor. The *holdout*
rows are never read here. Each fit row is simulated once (``calibration.record``); the
fit then re-prices the recordings (``calibration.predict``) while a Nelder-Mead search
minimises a robust mean of the log errors (pseudo-Huber: quadratic up to a 15% error,
linear beyond, so one odd row cannot pull the constants far, yet every row counts). The
uncertainty range is the 10th and 90th percentile of
measured / predicted over the fit rows after the fit.

Run:
    .venv/bin/python benchmarks/timing/fit.py                 # prints the constants
    .venv/bin/python benchmarks/timing/fit.py --write         # and writes them
    .venv/bin/python benchmarks/timing/fit.py --cache /tmp/fit.pickle   # reuse recordings
"""

from __future__ import annotations

import argparse
import math
import pathlib
import pickle
import re
import statistics
import sys
from collections.abc import Callable, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.timing.calibration import Recording, Row, load_published, predict, record  # noqa: E402

from torchplace.timemodel.params import Params, load  # noqa: E402

#: the constants fitted, with the start of a first search
FITTED = {
    "gemm.tensor_core_efficiency": 0.8,
    "gemm.simt_efficiency": 0.85,
    "gemm.convolution_efficiency": 1.0,
    "memory.efficiency": 0.85,
    "memory.efficiency_gddr": 0.85,
    "kernel.overhead_seconds": 3e-6,
    "host.factor": 3.0,
}
_DATA = ROOT / "src" / "torchplace" / "data" / "timemodel.toml"
_DELTA = 0.15  # pseudo-Huber: quadratic below a 15% log error, linear above


def loss(errors: Sequence[float]) -> float:
    return statistics.fmean(_DELTA**2 * (math.sqrt(1 + (e / _DELTA) ** 2) - 1) for e in errors)


def _errors(recordings: list[tuple[Row, Recording]], params: Params) -> list[float]:
    return [
        math.log(predict(rec, params).seconds / row.measured_seconds) for row, rec in recordings
    ]


def nelder_mead(f: Callable[[list[float]], float], start: list[float], *, steps: list[float],
                iterations: int = 300) -> list[float]:  # fmt: skip
    """A plain Nelder-Mead minimiser (no SciPy in the project's dependencies)."""
    simplex = [list(start)] + [
        [x + (steps[i] if i == j else 0.0) for j, x in enumerate(start)] for i in range(len(start))
    ]
    values = [f(p) for p in simplex]
    for _ in range(iterations):
        order = sorted(range(len(simplex)), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = [statistics.fmean(p[j] for p in simplex[:-1]) for j in range(len(start))]
        worst = simplex[-1]
        reflect = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        fr = f(reflect)
        if fr < values[0]:
            expand = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            fe = f(expand)
            simplex[-1], values[-1] = (expand, fe) if fe < fr else (reflect, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflect, fr
        else:
            contract = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            fc = f(contract)
            if fc < values[-1]:
                simplex[-1], values[-1] = contract, fc
            else:  # shrink towards the best
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (x - b) for b, x in zip(best, p, strict=True)]
                                    for p in simplex[1:]]  # fmt: skip
                values = [values[0]] + [f(p) for p in simplex[1:]]
        if max(values) - min(values) < 1e-7:
            break
    return simplex[min(range(len(simplex)), key=values.__getitem__)]


def _clamp(params: Params, names: list[str], x: list[float]) -> Params:
    from torchplace.timemodel.params import _RANGES

    values = {}
    for name, v in zip(names, x, strict=True):
        low, high = _RANGES[name]
        values[name] = min(max(v, low), high)
    return params.replace(values)


def fit(recordings: list[tuple[Row, Recording]], base: Params) -> tuple[Params, float]:
    names = list(FITTED)
    # from the constants as they are (FITTED's guesses for a first fit): a refit only improves
    start = [base[n] if base.fitted(n) else FITTED[n] for n in names]
    scale = [abs(v) or FITTED[n] or 1e-6 for v, n in zip(start, names, strict=True)]

    def objective(z: list[float]) -> float:
        x = [zi * s for zi, s in zip(z, scale, strict=True)]
        return loss(_errors(recordings, _clamp(base, names, x)))

    best = nelder_mead(objective, [1.0] * len(names), steps=[0.15] * len(names))
    fitted = _clamp(base, names, [b * s for b, s in zip(best, scale, strict=True)])
    ratios = sorted(row.measured_seconds / predict(rec, fitted).seconds for row, rec in recordings)
    low = max(0.1, min(1.0, _percentile(ratios, 0.1)))
    high = min(10.0, max(1.0, _percentile(ratios, 0.9)))
    fitted = fitted.replace({"uncertainty.low": low, "uncertainty.high": high})
    return fitted, loss(_errors(recordings, fitted))


def _percentile(values: list[float], q: float) -> float:
    k = (len(values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def write(params: Params, names: list[str]) -> None:
    """Replace the fitted values in the data file, keeping its comments and sources."""
    text = _DATA.read_text()
    for name in names:
        section, key = name.split(".")
        pattern = re.compile(rf"(\[{section}\][^\[]*?^{key} = {{ value = )([^,]+)(,)", re.M | re.S)
        text, n = pattern.subn(
            lambda m, value=params[name]: f"{m.group(1)}{value:.4g}{m.group(3)}", text
        )
        if n != 1:
            raise RuntimeError(f"could not find {name} in {_DATA}")
    _DATA.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the fitted values")
    parser.add_argument("--cache", type=pathlib.Path, help="keep the recordings in this file")
    args = parser.parse_args(argv)
    rows = [r for r in load_published() if r.split == "fit"]  # the holdout rows: never
    recordings: list[tuple[Row, Recording]] = []
    if args.cache and args.cache.exists():
        recordings = pickle.loads(args.cache.read_bytes())
    if {r.id for r, _ in recordings} != {r.id for r in rows}:
        recordings = []
        for i, row in enumerate(rows, 1):
            print(f"  [{i}/{len(rows)}] recording {row.id}", file=sys.stderr)
            recordings.append((row, record(row)))
        if args.cache:
            args.cache.write_bytes(pickle.dumps(recordings))
    base = load()
    print(f"{len(recordings)} fit rows; loss before: {loss(_errors(recordings, base)):.4f}")
    fitted, final = fit(recordings, base)
    print(f"loss after: {final:.4f}")
    for name in [*FITTED, "uncertainty.low", "uncertainty.high"]:
        print(f"  {name:32} {base[name]:.4g} -> {fitted[name]:.4g}")
    for (row, _), e in zip(recordings, _errors(recordings, fitted), strict=True):
        print(f"  {row.id:34} {math.exp(e) - 1:+7.1%}")
    if args.write:
        write(fitted, [*FITTED, "uncertainty.low", "uncertainty.high"])
        print(f"written to {_DATA.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
