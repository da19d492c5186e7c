"""Damage a torchplace checkpoint one byte at a time and classify what ``load`` does.

The checkpoint is what a training run saves: a small model (Linear, BatchNorm, Linear)
after three AdamW steps with a GradScaler and a cosine LR schedule, the random states of
Python, NumPy and torch, and plain values (epoch, step, a dict of metrics, a string, an EMA
tensor): about 24 KB (the issue's file was 17 KB). Every byte position (or every
``--stride``-th) is inverted (``byte ^ 0xFF``, ``--xor`` to choose another mask) in a copy
of the file, and the copy is loaded into fresh objects whose states, and the process's
random states, are snapshotted first. Outcomes:

- ``clear error``: a ``ValueError`` whose message names the file, nothing changed;
- ``loaded, same data``: no error, and everything loaded (objects, values, random states)
  equals what the undamaged file loads (the byte did not matter: a timestamp, padding);
- ``SILENT WRONG DATA``: no error, but something loaded differs from the undamaged file;
- ``other exception``: any other exception type, or a ValueError that does not name the file;
- ``PARTIAL APPLICATION``: an error was raised after an object or random state had changed.

Each position is also labelled with the zip region it falls in (local header, data.pkl,
tensor records, the RNG tensors' records, data descriptors, central directory, end records,
the archive comment). Positions run in ``--workers`` spawned processes (a flip that crashed
the interpreter would be reported as a broken worker, not hidden).

``--cost MIB`` measures instead what saving and loading cost (median of 5, one thread) for
a model of MIB MiB with its AdamW state, to compare the checks' price before and after.

``--format1`` writes the checkpoint as torchplace did before checkpoints were sealed, to
measure how files of that format are read now. Before/after: run the script once with the
code before the change on ``PYTHONPATH`` (``git archive <commit> src | tar -x -C /tmp/old``,
then ``PYTHONPATH=/tmp/old/src``), once without.

Run (``--write FILE`` only writes the checkpoint; ``--file FILE`` damages that file instead
of writing one, e.g. a file written by an older torchplace):
    .venv/bin/python benchmarks/checkpoint_bitflips.py [--format1] [--stride 1] [--workers 2]
    .venv/bin/python benchmarks/checkpoint_bitflips.py --cost 256
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import io
import json
import math
import multiprocessing
import os
import random
import struct
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import torchplace
from torchplace.runner import load, save

__all__ = ["build", "classify", "cost", "main", "regions", "save_format1"]

OUTCOMES = (
    "clear error",
    "loaded, same data",
    "SILENT WRONG DATA",
    "other exception",
    "PARTIAL APPLICATION",
)


# --- the checkpoint -------------------------------------------------------------------------


def _objects(seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.GELU(), nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12 + seed)
    return {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler}


def build() -> tuple[dict[str, Any], dict[str, Any]]:
    """The objects and plain values of the benchmark's checkpoint (deterministic)."""
    objects = _objects(seed=0)
    model, optimizer, scaler = objects["model"], objects["optimizer"], objects["scaler"]
    for _ in range(3):
        loss = model(torch.randn(4, 4)).square().mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        objects["scheduler"].step()
    values = {
        "epoch": 3,
        "step": 300,
        "best": {"loss": 0.4375, "epoch": 2},
        "tag": "run-7",
        "ema": torch.linspace(0, 1, 8),
    }
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    return objects, values


def save_format1(path: Path, objects: dict[str, Any], values: dict[str, Any]) -> None:
    """Write what torchplace wrote before checkpoints were sealed (format 1): ``torch.save``
    of the same payload to an open file, nothing appended."""
    from torchplace.runner import checkpoint

    payload = {
        "format": "torchplace.checkpoint",
        "version": 1,
        "objects": {name: obj.state_dict() for name, obj in objects.items()},
        "values": values,
        "rng": [checkpoint._rng_state()],
    }
    with open(path, "wb") as f:
        torch.save(payload, f)


# --- comparing states -----------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(
            isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _snapshot(objects: dict[str, Any], values: Any = None) -> dict[str, Any]:
    """Everything a load can change, copied."""

    def copy(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.detach().clone()
        if isinstance(x, dict):
            return {k: copy(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return type(x)(copy(v) for v in x)
        return x

    state = {name: copy(obj.state_dict()) for name, obj in objects.items()}
    state["random"] = random.getstate()
    state["numpy"] = np.random.get_state(legacy=False)
    state["torch"] = torch.get_rng_state()
    state["values"] = copy(values)
    return state


# --- damaging and classifying ---------------------------------------------------------------


def classify(path: Path, reference: dict[str, Any]) -> tuple[str, str]:
    """Load ``path`` into fresh objects; the outcome and the exception type (or "")."""
    fresh = _objects(seed=1)
    random.seed(11)
    np.random.seed(12)
    torch.manual_seed(13)
    before = _snapshot(fresh)
    try:
        values = load(path, **fresh)
    except Exception as e:
        changed = not _same(_snapshot(fresh), before)
        if changed:
            return "PARTIAL APPLICATION", type(e).__name__
        if isinstance(e, ValueError) and str(path) in str(e):
            return "clear error", ""
        return "other exception", type(e).__name__
    if _same(_snapshot(fresh, values), reference):
        return "loaded, same data", ""
    return "SILENT WRONG DATA", ""


def _reference(path: Path) -> dict[str, Any]:
    fresh = _objects(seed=1)
    values = load(path, **fresh)
    return _snapshot(fresh, values)


def _work(data: bytes, positions: list[int], xor: int) -> list[tuple[int, str, str]]:
    torch.set_num_threads(1)
    import warnings

    warnings.simplefilter("ignore")  # a note about an older format is not an outcome
    with tempfile.TemporaryDirectory(prefix="bitflips-") as folder:
        clean = Path(folder) / "clean.pt"
        clean.write_bytes(data)
        reference = _reference(clean)
        path = Path(folder) / "damaged.pt"
        results = []
        for position in positions:
            damaged = bytearray(data)
            damaged[position] ^= xor
            path.write_bytes(damaged)
            outcome, error = classify(path, reference)
            results.append((position, outcome, error))
    return results


# --- where a byte lies ----------------------------------------------------------------------


def regions(data: bytes) -> list[str]:
    """A label for every byte of the zip file ``data``."""
    label = ["other"] * len(data)

    def mark(start: int, stop: int, name: str) -> None:
        for i in range(max(start, 0), min(stop, len(data))):
            label[i] = name

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        start_dir = archive.start_dir
    payload = torch.load(io.BytesIO(data), weights_only=True)
    rng_tensors = sum(
        isinstance(v, torch.Tensor) for state in payload.get("rng", []) for v in _leaves(state)
    )
    records = sorted(
        (i for i in infos if "/data/" in i.filename), key=lambda i: int(i.filename.split("/")[-1])
    )
    rng_records = {i.filename for i in records[len(records) - rng_tensors :]}
    for info in infos:
        local = info.header_offset
        name_length, extra_length = struct.unpack("<HH", data[local + 26 : local + 30])
        mark(local, local + 30, "local header")
        mark(local + 30, local + 30 + name_length, "local header: name")
        mark(local + 30 + name_length, local + 30 + name_length + extra_length, "local: padding")
        start = local + 30 + name_length + extra_length
        end = start + info.compress_size
        if info.filename.endswith("data.pkl"):
            kind = "data.pkl (pickle)"
        elif info.filename in rng_records:
            kind = "RNG tensor records"
        elif "/data/" in info.filename:
            kind = "tensor records"
        else:
            kind = "small records"
        mark(start, end, kind)
        descriptor = 24 if info.compress_size >= 0xFFFFFFFF else 16
        if info.flag_bits & 0x08:
            mark(end, end + descriptor, "data descriptors")
    end_of_central = data.rfind(b"PK\x05\x06")
    mark(start_dir, end_of_central, "central directory")
    zip64_end = data.rfind(b"PK\x06\x06", start_dir)
    if zip64_end >= 0:
        mark(zip64_end, end_of_central, "end records")
    mark(end_of_central, end_of_central + 22, "end records")
    mark(end_of_central + 22, len(data), "archive comment")
    return label


def _leaves(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [leaf for v in x.values() for leaf in _leaves(v)]
    if isinstance(x, list | tuple):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


# --- what the checks cost --------------------------------------------------------------------


def cost(mib: int, repeat: int = 5) -> tuple[float, float]:
    """Median seconds of ``save`` and of ``load`` of a model of ``mib`` MiB with AdamW state."""
    import statistics

    torch.set_num_threads(1)
    side = int((mib * 2**20 / 4 / 4) ** 0.5)  # 4 square layers, float32
    model = nn.Sequential(*(nn.Linear(side, side, bias=False) for _ in range(4)))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, side)).sum().backward()
    optimizer.step()
    saves, loads = [], []
    with tempfile.TemporaryDirectory(prefix="bitflips-") as folder:
        path = Path(folder) / "big.pt"
        for _ in range(repeat):
            started = time.perf_counter()
            save(path, model=model, optimizer=optimizer, step=1)
            saves.append(time.perf_counter() - started)
            started = time.perf_counter()
            load(path, model=model, optimizer=optimizer)
            loads.append(time.perf_counter() - started)
        size = path.stat().st_size
    print(
        f"cost: a {size / 2**20:.0f} MiB checkpoint (model {mib} MiB + AdamW state), median of "
        f"{repeat}: save {statistics.median(saves):.2f} s, load {statistics.median(loads):.2f} s"
    )
    return statistics.median(saves), statistics.median(loads)


# --- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=1, help="damage every N-th byte")
    parser.add_argument("--xor", type=lambda s: int(s, 0), default=0xFF, help="mask (0xFF)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--file", type=Path, help="damage this checkpoint (built by build())")
    parser.add_argument("--write", type=Path, help="only write the checkpoint here, then exit")
    parser.add_argument(
        "--format1", action="store_true", help="write the checkpoint as format 1 (unsealed)"
    )
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument(
        "--cost", type=int, metavar="MIB", help="instead: time save/load of a MIB MiB model"
    )
    args = parser.parse_args(argv)
    if args.cost:
        cost(args.cost)
        return 0

    if args.file is None:
        objects, values = build()
        with tempfile.TemporaryDirectory(prefix="bitflips-") as folder:
            path = args.write or Path(folder) / "ckpt.pt"
            if args.format1:
                save_format1(path, objects, values)
            else:
                save(path, **objects, **values)
            data = path.read_bytes()
        if args.write is not None:
            print(f"wrote {path} ({len(data)} bytes)")
            return 0
    else:
        path = args.file
        data = path.read_bytes()
    labels = regions(data)
    positions = list(range(0, len(data), args.stride))
    chunks = [positions[i :: args.workers * 8] for i in range(args.workers * 8)]

    started = time.perf_counter()
    results: list[tuple[int, str, str]] = []
    context = multiprocessing.get_context("spawn")  # no fork of a process that ran torch
    with concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=context) as pool:
        for part in pool.map(_work, [data] * len(chunks), chunks, [args.xor] * len(chunks)):
            results.extend(part)
    elapsed = time.perf_counter() - started

    counts = collections.Counter(outcome for _, outcome, _ in results)
    errors = collections.Counter(error for _, outcome, error in results if error)
    by_region: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for position, outcome, _ in results:
        by_region[labels[position]][outcome] += 1
    examples = {
        outcome: [p for p, o, _ in results if o == outcome][:12]
        for outcome in OUTCOMES
        if outcome not in ("clear error", "loaded, same data")
    }
    version = getattr(torchplace, "__version__", "?")
    if args.json:
        print(
            json.dumps(
                {
                    "file_bytes": len(data),
                    "positions": len(results),
                    "xor": args.xor,
                    "outcomes": {o: counts[o] for o in OUTCOMES},
                    "exception_types": dict(errors),
                    "by_region": {r: dict(c) for r, c in sorted(by_region.items())},
                    "examples": examples,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"torchplace {version}, torch {torch.__version__}: {len(results)} of {len(data)} byte "
        f"positions of {path.name} (stride {args.stride}), each byte ^= {args.xor:#04x}, "
        f"{elapsed:.0f} s"
    )
    print()
    width = max(len(o) for o in OUTCOMES)
    for outcome in OUTCOMES:
        print(f"  {outcome:<{width}}  {counts[outcome]:>6}")
    if errors:
        print("  exception types: " + ", ".join(f"{k} {v}" for k, v in errors.most_common()))
    print()
    short = {
        "clear error": "clear",
        "loaded, same data": "same",
        "SILENT WRONG DATA": "silent",
        "other exception": "other",
        "PARTIAL APPLICATION": "partial",
    }
    header = f"  {'region':<22} {'bytes':>6}" + "".join(f" {short[o]:>7}" for o in OUTCOMES)
    print(header)
    for region, counter in sorted(by_region.items(), key=lambda kv: -sum(kv[1].values())):
        row = f"  {region:<22} {sum(counter.values()):>6}"
        print(row + "".join(f" {counter[o]:>7}" for o in OUTCOMES))
    for outcome, where in examples.items():
        if where:
            print(f"  {outcome} at positions: {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
