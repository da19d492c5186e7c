"""Profile the timing workloads on a real GPU: step times and per-kernel times, as JSON.

For each case (a workload of ``benchmarks/timing/workloads.py`` at a batch that fits a
16 GB GPU), the step runs a few times to warm up, then ``torch.profiler`` records the CUDA
kernels of a few more steps while CUDA events time them. The JSON written under
``out_dir`` (``timing-<gpu>.json``, the format :func:`benchmarks.timing.calibration.load_profile`
reads) holds the GPU, the software and, per case, the median step time and every kernel's
name, calls and CUDA time per step. ``benchmarks/gpu_diff.py --timing`` calls :func:`run`;
``benchmarks/results/`` is where such files are committed, and
``benchmarks/timing_accuracy.py --profiles benchmarks/results`` compares them with the model.

Run (on a machine with a GPU):
    python benchmarks/timing/profile_gpu.py --out benchmarks/results [--quick]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.timing.calibration import PROFILE_SCHEMA  # noqa: E402
from benchmarks.timing.workloads import Run, build  # noqa: E402

__all__ = ["CASES", "run"]

#: (id, workload, precision, batch, options): small enough for a 16 GB GPU
CASES: tuple[tuple[str, str, str, int, dict[str, str]], ...] = (
    ("resnet50-train-amp-b64", "resnet50-train", "amp-fp16", 64, {"channels_last": "1"}),
    ("resnet50-train-fp32-b32", "resnet50-train", "fp32", 32, {}),
    ("resnet50-infer-amp-b128", "resnet50-infer", "amp-fp16", 128, {"channels_last": "1"}),
    ("bert-large-fp16-b8", "bert-large-squad", "fp16-o2", 8, {"seq": "384"}),
    ("gpt2-train-bf16-b8", "gpt2-train", "amp-bf16", 8, {"seq": "1024"}),
    ("llama2-7b-decode", "llama-decode", "bf16", 1, {"model": "llama-2-7b"}),
)
_QUICK = {"resnet50-train-amp-b64", "bert-large-fp16-b8", "llama2-7b-decode"}


def _require_cuda() -> Any:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            "profile_gpu needs a CUDA GPU: torch.cuda.is_available() is False on this machine "
            f"(torch {torch.__version__}). Run it where a GPU is, e.g. through "
            "benchmarks/gpu_diff.py --timing on a lent GPU."
        )
    return torch


def _catalog_key(name: str) -> str | None:
    from torchplace import catalog

    try:
        return catalog.lookup(name).key
    except ValueError:
        return None


def _profile_case(torch: Any, run: Run, steps: int) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    step = build(run)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    kernels = []
    for event in prof.key_averages():
        cuda = getattr(event, "device_time_total", None)
        if cuda is None:
            cuda = getattr(event, "cuda_time_total", 0.0)
        if cuda:
            kernels.append(
                {
                    "name": event.key,
                    "calls": event.count / steps,
                    "cuda_seconds": cuda / 1e6 / steps,
                }
            )
    kernels.sort(key=lambda k: -k["cuda_seconds"])
    return {"step_seconds": statistics.median(times), "step_seconds_all": times, "kernels": kernels}


def run(out_dir: pathlib.Path, quick: bool) -> pathlib.Path:
    """Profile the cases on this machine's GPU; write and return the JSON file's path.

    Raises:
        RuntimeError: no CUDA GPU here (the message says so and where to run it).
    """
    torch = _require_cuda()
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name()
    key = _catalog_key(name)
    major, minor = torch.cuda.get_device_capability()
    cases = []
    for case_id, workload, precision, batch, options in CASES:
        if quick and case_id not in _QUICK:
            continue
        run_ = Run(workload, precision, batch, dict(options))
        entry: dict[str, Any] = {
            "id": case_id,
            "workload": workload,
            "precision": precision,
            "batch": batch,
            "options": dict(options),
        }
        try:
            entry.update(_profile_case(torch, run_, 3 if quick else 10))
        except torch.cuda.OutOfMemoryError as e:
            entry["skipped"] = f"out of memory on {name}: {str(e).splitlines()[0]}"
        finally:
            torch.cuda.empty_cache()
        if "skipped" not in entry:
            cases.append(entry)
    data = {
        "schema": PROFILE_SCHEMA,
        "device": {"name": name, "catalog_key": key, "capability": [major, minor]},
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "quick": quick,
        "cases": cases,
    }
    path = out_dir / f"timing-{key or name.replace(' ', '-').lower()}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)  # never a partial file
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=ROOT / "benchmarks" / "results",
        help="folder for timing-<gpu>.json (default benchmarks/results)",
    )
    parser.add_argument("--quick", action="store_true", help="three cases, three steps each")
    args = parser.parse_args(argv)
    try:
        path = run(args.out, args.quick)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
