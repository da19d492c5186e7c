"""Moving realistic nested batches: torchplace.to against the alternatives, in one run.

Two batches: ``tensors``, 32 tensors in a dict with nested lists (a multimodal batch),
and ``mixed``, a batch that carries more than tensors (a 4x4 tensor, a list of 8 small
token-id tensors, a nested dict with a list of two strings and a bool mask, and an int
step counter). For each, compared side by side: the baseline, a hand-written
comprehension that knows the batch's layout (a dict comprehension that moves the
tensors among the top-level values, one more per nested list or dict); a hand-written
literal that names every key and tests no value, which is the floor for Python code;
``torchplace.to``; ``accelerate.utils.send_to_device``; and Lightning's
``move_data_to_device``. A library that is not installed gets a "not installed" row.
Each is timed in interleaved rounds (timeit-style: ``--number`` calls per round,
``--repeat`` rounds); the median per call is printed with its ratio to the baseline.

With no accelerator the copy is cpu -> cpu, where every tensor is already in place and
``.to`` returns it: that measures the traversal overhead alone, which is the point of
comparing the libraries. On an accelerator the copies dominate. For a cpu (or meta)
target the clock is this process's CPU time (``--timer cpu``), which other jobs on a
shared machine do not inflate; with an accelerator it is wall time, synchronised on both
sides of each round.

Run (the comparison libraries live in their own venv):
    python3 -m venv .venv-bench && .venv-bench/bin/pip install torch==2.13.0
    .venv-bench/bin/pip install accelerate lightning && .venv-bench/bin/pip install -e .
    .venv-bench/bin/python benchmarks/bench_to.py [--batch mixed] [--device cuda] [--pin]
"""

from __future__ import annotations

import argparse
import importlib
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

import torchplace

__all__ = [
    "hand_written",
    "hand_written_mixed",
    "literal",
    "literal_mixed",
    "main",
    "make_batch",
    "make_mixed_batch",
]

_GIB = 1024**3
_Mover = Callable[[Any, torch.device], Any]


def make_batch(*, batch_size: int = 8, seq_len: int = 512, pin: bool = False) -> dict[str, Any]:
    """A multimodal training batch: 12 top-level tensors and 3 nested lists, 32 tensors."""
    g = torch.Generator().manual_seed(0)
    b, s = batch_size, seq_len
    batch: dict[str, Any] = {
        "input_ids": torch.randint(0, 32000, (b, s), generator=g),
        "attention_mask": torch.ones(b, s, dtype=torch.long),
        "token_type_ids": torch.zeros(b, s, dtype=torch.long),
        "position_ids": torch.arange(s).expand(b, s).contiguous(),
        "pixel_values": torch.randn(b, 3, 224, 224, generator=g),
        "pixel_mask": torch.ones(b, 224, 224, dtype=torch.bool),
        "image_sizes": torch.full((b, 2), 224),
        "audio_features": torch.randn(b, 80, 300, generator=g),
        "audio_mask": torch.ones(b, 300, dtype=torch.bool),
        "labels": torch.randint(0, 32000, (b, s), generator=g),
        "loss_weights": torch.ones(b),
        "sample_index": torch.arange(b),
        # ragged per-sample targets, as a detection collate_fn returns them
        "boxes": [torch.rand(n, 4, generator=g) for n in range(3, 3 + b)],
        "classes": [torch.randint(0, 80, (n,), generator=g) for n in range(3, 3 + b)],
        "masks": [[torch.ones(2, 56, 56, dtype=torch.bool) for _ in range(2)] for _ in range(2)],
    }
    return _map_tensors(batch, lambda t: t.pin_memory()) if pin else batch


def make_mixed_batch(*, pin: bool = False) -> dict[str, Any]:
    """A batch with more than tensors: 10 small tensors among strings, a bool and an int."""
    g = torch.Generator().manual_seed(0)
    batch: dict[str, Any] = {
        "features": torch.randn(4, 4, generator=g),
        # token ids per sample, of different lengths, as a collate_fn that does not pad keeps them
        "token_ids": [torch.randint(0, 32000, (n,), generator=g) for n in range(5, 13)],
        "meta": {"source": ["train-00001.jsonl", "train-00002.jsonl"], "mask": torch.ones(4) > 0},
        "step": 1000,
    }
    return _map_tensors(batch, lambda t: t.pin_memory()) if pin else batch


def _map_tensors(obj: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_tensors(v, fn) for v in obj]
    return obj


def _tensors(obj: Any) -> list[Tensor]:
    if isinstance(obj, Tensor):
        return [obj]
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else []
    return [t for v in values for t in _tensors(v)]


def hand_written(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """What a careful user writes for this exact batch: no generic traversal at all."""
    out = {k: v.to(device) for k, v in batch.items() if isinstance(v, Tensor)}
    out["boxes"] = [t.to(device) for t in batch["boxes"]]
    out["classes"] = [t.to(device) for t in batch["classes"]]
    out["masks"] = [[t.to(device) for t in row] for row in batch["masks"]]
    return out


def hand_written_mixed(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The same for the mixed batch: tensors moved, everything else passed through."""
    out = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in batch.items()}
    out["token_ids"] = [t.to(device) for t in batch["token_ids"]]
    out["meta"] = {
        k: v.to(device) if isinstance(v, Tensor) else v for k, v in batch["meta"].items()
    }
    return out


def literal(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The floor for the 32-tensor batch: every key written out, no test of any value."""
    return {
        "input_ids": batch["input_ids"].to(device),
        "attention_mask": batch["attention_mask"].to(device),
        "token_type_ids": batch["token_type_ids"].to(device),
        "position_ids": batch["position_ids"].to(device),
        "pixel_values": batch["pixel_values"].to(device),
        "pixel_mask": batch["pixel_mask"].to(device),
        "image_sizes": batch["image_sizes"].to(device),
        "audio_features": batch["audio_features"].to(device),
        "audio_mask": batch["audio_mask"].to(device),
        "labels": batch["labels"].to(device),
        "loss_weights": batch["loss_weights"].to(device),
        "sample_index": batch["sample_index"].to(device),
        "boxes": [t.to(device) for t in batch["boxes"]],
        "classes": [t.to(device) for t in batch["classes"]],
        "masks": [[t.to(device) for t in row] for row in batch["masks"]],
    }


def literal_mixed(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The floor for the mixed batch (the list of strings is passed on, not copied)."""
    meta = batch["meta"]
    return {
        "features": batch["features"].to(device),
        "token_ids": [t.to(device) for t in batch["token_ids"]],
        "meta": {"source": meta["source"], "mask": meta["mask"].to(device)},
        "step": batch["step"],
    }


def _torchplace(batch: Any, device: torch.device) -> Any:
    return torchplace.to(batch, device)


def _load(module: str, name: str) -> _Mover | None:
    try:
        fn: _Mover = getattr(importlib.import_module(module), name)
    except ImportError:
        return None
    return fn


def _libraries() -> list[tuple[str, _Mover | None, str]]:
    """(name, function or None when not installed, the install that provides it)."""
    lightning = _load("lightning.fabric.utilities.apply_func", "move_data_to_device") or _load(
        "lightning_fabric.utilities.apply_func", "move_data_to_device"
    )
    return [
        ("torchplace.to", _torchplace, ""),
        (
            "accelerate.utils.send_to_device",
            _load("accelerate.utils", "send_to_device"),
            "pip install accelerate",
        ),
        ("lightning move_data_to_device", lightning, "pip install lightning"),
    ]


# name: (what it is, how to build it, the hand-written comprehension, the literal)
_BATCHES: dict[str, tuple[str, Callable[..., dict[str, Any]], _Mover, _Mover]] = {
    "tensors": (
        "32 tensors (12 top-level, lists nested 2 deep)",
        make_batch,
        hand_written,
        literal,
    ),
    "mixed": (
        "10 small tensors among a list of strings, a nested dict and an int",
        make_mixed_batch,
        hand_written_mixed,
        literal_mixed,
    ),
}
_BASELINE = "hand-written comprehension"
_LITERAL = "hand-written literal (the floor)"


def _sync(device: torch.device) -> None:
    if device.type not in ("cpu", "meta"):
        torch.accelerator.synchronize()


def _skeleton(obj: Any) -> Any:
    """``obj`` with each tensor replaced by its shape and dtype: what moving must keep."""
    if isinstance(obj, Tensor):
        return ("tensor", tuple(obj.shape), obj.dtype)
    if isinstance(obj, dict):
        return {k: _skeleton(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_skeleton(v) for v in obj]
    return obj


def _check_moved(name: str, batch: Any, out: Any, device: torch.device) -> None:
    tensors = _tensors(out)
    if _skeleton(out) != _skeleton(batch) or any(t.device.type != device.type for t in tensors):
        raise SystemExit(
            f"error: {name} did not move the batch to {device} with its structure and "
            f"{len(_tensors(batch))} tensors intact"
        )


def _measure(
    movers: list[tuple[str, _Mover]], batch: Any, device: torch.device, args: argparse.Namespace
) -> dict[str, float]:
    """Median seconds per call of each mover, timed in interleaved rounds."""
    clock = time.process_time if args.timer == "cpu" else time.perf_counter
    for name, fn in movers:
        _check_moved(name, batch, fn(batch, device), device)  # also the warm-up
    times: dict[str, list[float]] = {name: [] for name, _ in movers}
    for _ in range(args.repeat):  # interleaved rounds: drift on a shared machine hits all alike
        for name, fn in movers:
            _sync(device)
            start = clock()
            for _ in range(args.number):
                fn(batch, device)
            _sync(device)
            times[name].append((clock() - start) / args.number)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = "cpu"
    if torch.accelerator.is_available():
        accelerator = torch.accelerator.current_accelerator()
        default = str(accelerator) if accelerator is not None else "cpu"
    parser.add_argument("--device", default=default, help=f"target device (default {default})")
    parser.add_argument(
        "--batch",
        choices=(*_BATCHES, "both"),
        default="both",
        help="which batch to move (default both, one table each)",
    )
    parser.add_argument("--repeat", type=int, default=200, help="timed rounds (default 200)")
    parser.add_argument("--number", type=int, default=100, help="calls per round (default 100)")
    parser.add_argument("--pin", action="store_true", help="pin the source batch in host memory")
    parser.add_argument(
        "--timer",
        choices=("auto", "cpu", "wall"),
        default="auto",
        help="cpu: this process's CPU time (steady on a shared machine); wall: elapsed time, "
        "needed when an accelerator does the work (default: cpu for a cpu or meta target, "
        "else wall)",
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if args.pin and device.type == "cpu":
        parser.error(
            "--pin needs an accelerator target: pinned memory speeds host-to-device copies"
        )
    if args.timer == "auto":  # no device work to wait for on the host
        args.timer = "cpu" if device.type in ("cpu", "meta") else "wall"

    src = "pinned cpu" if args.pin else "cpu"
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"torchplace {torchplace.__version__}; {args.repeat} rounds x {args.number} calls, "
        f"median per call, {args.timer} time"
    )
    if device.type == "cpu":
        print(
            "cpu -> cpu: every tensor is already in place, so no data is copied; this "
            "measures the traversal overhead alone"
        )
    libraries = _libraries()
    chosen = list(_BATCHES) if args.batch == "both" else [args.batch]
    for key in chosen:
        what, make, baseline, floor = _BATCHES[key]
        batch = make(pin=args.pin)
        nbytes = sum(t.numel() * t.element_size() for t in _tensors(batch))
        movers = [(_BASELINE, baseline), (_LITERAL, floor)]
        movers += [(n, fn) for n, fn, _ in libraries if fn is not None]
        medians = _measure(movers, batch, device, args)
        size = f"{nbytes / _GIB:.3f} GiB" if nbytes >= 2**20 else f"{nbytes:,} bytes"
        print(f"\n{key}: {what}, {size}, {src} -> {device}")
        print(f"{'implementation':<34}{'median µs':>12}{'ratio':>9}")
        base = medians[_BASELINE]
        for name in (_BASELINE, _LITERAL):
            print(f"{name:<34}{medians[name] * 1e6:>12.2f}{medians[name] / base:>8.2f}x")
        for name, fn, install in libraries:
            if fn is None:
                print(f"{name:<34}{'not installed':>21}  ({install})")
                continue
            print(f"{name:<34}{medians[name] * 1e6:>12.2f}{medians[name] / base:>8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
