"""How close is the step-time model to published GPU measurements?

Every row of ``benchmarks/timing/published.csv`` (a measured throughput or step time with
its source) is simulated once on its GPU (``torchplace.simulate(..., values="placeholder")``
running the workload of ``benchmarks/timing/workloads.py``) and priced by the model; the
table shows predicted and measured time per step, the error (predicted / measured − 1),
what bounds the step, and the source. The *held-back* rows were chosen before any
constant was fitted and never used by ``benchmarks/timing/fit.py``; the *fit* rows are
those the fitted constants were fitted on. The issue's goal, on the held-back rows:
median absolute error ≤ 15%, none worse than 35%.

Then the collectives: the bus bandwidth the model gives each link against published
nccl-tests results (``benchmarks/timing/nccl.csv``). With ``--profiles DIR``, GPU profiles
written by ``benchmarks/timing/profile_gpu.py`` (``benchmarks/results/``) are checked too:
per step and per kernel class.

Run:
    .venv/bin/python benchmarks/timing_accuracy.py            # every row, a few minutes
    .venv/bin/python benchmarks/timing_accuracy.py --only r50 # rows whose id contains r50
    .venv/bin/python benchmarks/timing_accuracy.py --json out.json
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import statistics
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.timing.calibration import (  # noqa: E402
    HERE,
    Row,
    load_profile,
    load_published,
    predict,
    record,
    roofline,
)

GOAL_MEDIAN, GOAL_WORST = 0.15, 0.35


def _error(predicted: float, measured: float) -> float:
    return predicted / measured - 1


def evaluate(rows: list[Row], *, progress: bool = True) -> list[dict[str, Any]]:
    """Simulate and price every row; one result dict per row."""
    results = []
    for i, row in enumerate(rows, 1):
        start = time.perf_counter()
        recording = record(row)
        p = predict(recording)
        results.append({
            "id": row.id, "split": row.split, "workload": row.workload, "gpu": row.gpu,
            "precision": row.precision, "batch": row.batch,
            "predicted_seconds": p.seconds, "measured_seconds": row.measured_seconds,
            "error": _error(p.seconds, row.measured_seconds), "bound": p.bound,
            "gpu_seconds": p.gpu_seconds, "host_seconds": p.host_seconds,
            "roofline_seconds": roofline(recording),
            "source": row.source,
        })  # fmt: skip
        if progress:
            print(f"  [{i}/{len(rows)}] {row.id}: {time.perf_counter() - start:.1f} s",
                  file=sys.stderr)  # fmt: skip
    return results


def _ms(s: float) -> str:
    return f"{s * 1e3:10.2f}"


def _roofline_error(r: dict[str, Any]) -> str:
    if "roofline_seconds" not in r:
        return "-"
    return f"{_error(r['roofline_seconds'], r['measured_seconds']):+.0%}"


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [abs(r["error"]) for r in results]
    if not errors:
        return {"rows": 0}
    return {
        "rows": len(errors),
        "median_abs_error": statistics.median(errors),
        "worst_abs_error": max(errors),
        "gpus": sorted({r["gpu"] for r in results}),
        "workloads": sorted({r["workload"] for r in results}),
    }


def print_table(title: str, results: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    header = (f"{'id':34} {'GPU':15} {'precision':9} {'batch':>5} {'predicted ms':>12} "
              f"{'measured ms':>12} {'error':>7}  {'bound':7} {'roofline':>8}  source")  # fmt: skip
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['id']:34} {r['gpu']:15} {r['precision']:9} {r['batch']:>5} "
              f"{_ms(r['predicted_seconds']):>12} {_ms(r['measured_seconds']):>12} "
              f"{r['error']:+7.1%}  {r['bound']:7} {_roofline_error(r):>8}  "
              f"{r['source'][:90]}")  # fmt: skip
    s = summary(results)
    if s["rows"]:
        counts = f"{s['rows']} rows, {len(s['gpus'])} GPU models, {len(s['workloads'])} workloads"
        errors = f"median |error| {s['median_abs_error']:.1%}, worst {s['worst_abs_error']:.1%}"
        print(f"  {counts}: {errors}")
        old = [abs(_error(r["roofline_seconds"], r["measured_seconds"])) for r in results
               if "roofline_seconds" in r]  # fmt: skip
        if old:
            print(f"  the previous release's roofline on the same rows: median |error| "
                  f"{statistics.median(old):.1%}, worst {max(old):.1%}")  # fmt: skip


def nccl_rows() -> list[dict[str, Any]]:
    """The model's NCCL bus bandwidth against published nccl-tests results."""
    from torchplace import catalog
    from torchplace.timemodel import comm, params

    p = params.load()
    out = []
    with open(HERE / "nccl.csv", newline="") as f:
        for line in csv.DictReader(f):
            spec = catalog.lookup(line["gpu"])
            link = float(spec.gpu_link_bandwidth_bytes_per_s or spec.host_bandwidth_bytes_per_s)
            predicted = comm.bus_bandwidth(link, p)
            measured = float(line["busbw_gb_s"]) * 1e9
            out.append({**line, "predicted_busbw_gb_s": predicted / 1e9,
                        "error": _error(predicted, measured)})  # fmt: skip
    return out


def _shown(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def profile_rows(directory: pathlib.Path) -> list[dict[str, Any]]:
    """Profiles from a real GPU against the model's prediction of the same case."""
    rows = {r.id: r for r in load_published()}
    out = []
    for path in sorted(directory.glob("timing-*.json")):
        data = load_profile(path)
        gpu = data["device"]["catalog_key"]
        for case in data["cases"]:
            row = Row(id=case["id"], split="profile", workload=case["workload"], gpu=gpu,
                      precision=case["precision"], batch=case["batch"],
                      options=case.get("options", {}), metric="ms/step",
                      value=case["step_seconds"] * 1e3, software=data.get("torch", ""),
                      source=_shown(path))  # fmt: skip
            rows.setdefault(row.id, row)
            p = predict(record(row))
            out.append({"id": row.id, "split": "profile", "workload": row.workload, "gpu": gpu,
                        "precision": row.precision, "batch": row.batch,
                        "predicted_seconds": p.seconds, "measured_seconds": row.measured_seconds,
                        "error": _error(p.seconds, row.measured_seconds), "bound": p.bound,
                        "gpu_seconds": p.gpu_seconds, "host_seconds": p.host_seconds,
                        "source": row.source})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="rows whose id contains this text")
    parser.add_argument("--split", choices=("fit", "holdout"), help="one split only")
    parser.add_argument("--profiles", type=pathlib.Path,
                        help="also check the timing-*.json profiles in this folder")  # fmt: skip
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    args = parser.parse_args(argv)
    import torch

    rows = [
        r
        for r in load_published()
        if (not args.only or args.only in r.id) and (not args.split or r.split == args.split)
    ]
    print(
        f"torch {torch.__version__}; {len(rows)} published measurements "
        "(benchmarks/timing/published.csv); predicted by torchplace's step-time model"
    )
    results = evaluate(rows)
    held = [r for r in results if r["split"] == "holdout"]
    fit = [r for r in results if r["split"] == "fit"]
    print_table("Held-back measurements (never used to fit)", held)
    print_table("Fit measurements (the fitted constants were fitted on these)", fit)
    nccl = nccl_rows()
    print("\nCollectives: NCCL bus bandwidth (benchmarks/timing/nccl.csv)")
    for n in nccl:
        predicted = f"predicted {n['predicted_busbw_gb_s']:6.0f} GB/s"
        measured = f"measured {float(n['busbw_gb_s']):6.0f} GB/s ({n['error']:+.1%})"
        print(f"  {n['id']:34} {n['gpu']:15} {predicted}, {measured}  {n['source'][:80]}")
    profiles = profile_rows(args.profiles) if args.profiles else []
    if profiles:
        print_table("Real-GPU profiles (benchmarks/timing/profile_gpu.py)", profiles)
    s = summary(held)
    if s["rows"]:
        met = s["median_abs_error"] <= GOAL_MEDIAN and s["worst_abs_error"] <= GOAL_WORST
        print(f"\nGoal on the held-back rows (median |error| <= {GOAL_MEDIAN:.0%}, worst <= "
              f"{GOAL_WORST:.0%}): {'met' if met else 'NOT met'}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"holdout": held, "fit": fit, "nccl": nccl,
                                         "profiles": profiles}, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
