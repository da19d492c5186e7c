"""``--values auto`` against ``placeholder`` and ``real``: wall time and peak RSS (issue 28).

``torchplace sim --values auto`` (the default) should cost at most 1.2 × the better of the
two modes, in wall time and in peak host memory: placeholders where real values would not
fit the host, real values where they fit, never both in full. This runs one training
script under ``torchplace sim --values MODE`` for each mode and model, each in its own
process tree, and prints their wall time and peak RSS side by side:

- ``cnn``: a small CNN (two conv blocks with batch norm, a linear head), batch 64 × 3 × 32 ×
  32, 5 steps;
- ``gpt2``: GPT-2 small (124M parameters), fp32, batch 2 × 256 tokens, 2 steps;
- ``gpt2-xl``: GPT-2 XL (1.56B parameters), fp32, the same batch and steps;
- ``llama-7b``: a 7B Llama (6.74B parameters), bf16 weights, the same batch and steps.

The transformers are ``transformers``' own models built from their configs with random
weights (``_from_config`` under ``with torch.device("cuda")``: nothing is downloaded), each
step forward, backward and ``AdamW(foreach=True)``, its loss printed (a value read back).
Real values of GPT-2 XL (6.2 GB of weights before gradients and optimizer state) and of the
7B model do not fit this host's limit: ``real`` then stops with ``HostMemoryError``, having
paid up to the limit — the cost ``auto`` must not pay.

Each case is ``python -m torchplace sim --json --values MODE --host-memory-limit LIMIT``
run by a small measuring process (this file with ``--measure``): its wall time, and the
largest resident set of the processes it waited for (``getrusage(RUSAGE_CHILDREN)``: the
command line, its child and, for ``auto``, the scout; torch's import included). Printed per
model: each mode's wall seconds, peak RSS (GB = 10⁹ bytes), the values it ran with and how
it ended; then ``auto`` against the mode it should run — real values where the ``real`` run
answered (it fit the host), placeholders where it stopped with ``HostMemoryError`` — and
the fastest mode's wall time (placeholders, usually: where real values fit, ``auto`` runs
them, and pays their compute, by design).
Cases run one at a time (``--rounds`` alternates the modes); run it with ``nice`` on a
shared machine.

Run:
    nice .venv/bin/python benchmarks/bench_values.py [--models cnn gpt2 gpt2-xl llama-7b]
        [--host-memory-limit 6GiB] [--rounds 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

MODES = ("placeholder", "real", "auto")
MODELS = ("cnn", "gpt2", "gpt2-xl", "llama-7b")
_GOAL = 1.2
_ANSWERED = ("ok", "OutOfMemoryError")

# The training script each case runs (its own file: torchplace sim runs scripts).
SCRIPT = """\
import sys
import torch
from torch import nn

name, steps = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
if name == "cnn":
    with torch.device("cuda"):
        model = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
        )

    def loss_of_a_batch():
        x = torch.randn(64, 3, 32, 32, device="cuda")
        y = torch.randint(0, 10, (64,), device="cuda")
        return nn.functional.cross_entropy(model(x), y)
else:
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if name.startswith("llama"):
        config = LlamaConfig(
            hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
            num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
        )
        cls, dtype = LlamaForCausalLM, torch.bfloat16
    else:
        config = GPT2Config() if name == "gpt2" else GPT2Config(n_embd=1600, n_layer=48, n_head=25)
        cls, dtype = GPT2LMHeadModel, torch.float32
    with torch.device("cuda"):
        model = cls._from_config(config, dtype=dtype)

    def loss_of_a_batch():
        x = torch.randint(0, config.vocab_size, (2, 256), device="cuda")
        return model(input_ids=x, labels=x).loss

opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
for step in range(steps):
    loss = loss_of_a_batch()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step}: loss {loss.item():.4f}", flush=True)
"""
STEPS = {"cnn": 5, "gpt2": 2, "gpt2-xl": 2, "llama-7b": 2}


def measure(command: list[str]) -> dict[str, Any]:
    """Run ``command``; its wall seconds, peak RSS (bytes) and ``--json`` report."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = {}
    error = report.get("error") or {}
    return {
        "wall_s": wall,
        "peak_rss_bytes": peak,
        "returncode": done.returncode,
        "values": report.get("values"),
        "values_decision": report.get("values_decision"),
        "ended": error.get("type") or ("ok" if done.returncode == 0 else "failed"),
        "stderr_tail": done.stderr[-600:] if done.returncode else "",
    }


def run_case(model: str, mode: str, script: str, limit: str) -> dict[str, Any]:
    """One case in a measuring process of its own (so that its RSS is its own)."""
    command = [
        sys.executable, "-m", "torchplace", "sim", "--json", "--values", mode,
        "--host-memory-limit", limit, script, model, str(STEPS[model]),
    ]  # fmt: skip
    out = subprocess.run(
        [sys.executable, __file__, "--measure", "--", *command],
        capture_output=True,
        text=True,
        check=True,
    )
    return {"model": model, "mode": mode, **json.loads(out.stdout)}


def summarize(model: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per mode; auto against the mode it should run (real values where the real
    run answered — it fit the host —, else placeholders) and against the fastest mode."""
    rows: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        mine = [c for c in cases if c["mode"] == mode]
        rows[mode] = {
            "wall_s": statistics.median(c["wall_s"] for c in mine),
            "peak_rss_bytes": statistics.median(c["peak_rss_bytes"] for c in mine),
            "values": mine[-1]["values"],
            "ended": mine[-1]["ended"],
            "values_decision": mine[-1]["values_decision"],
        }
    # a simulation that ended in the GPU's out-of-memory error answered the question too
    target = "real" if rows["real"]["ended"] in _ANSWERED else "placeholder"
    auto = rows["auto"]
    fastest = min(("placeholder", "real"), key=lambda m: rows[m]["wall_s"])
    ratios = {
        "wall_vs_target": auto["wall_s"] / rows[target]["wall_s"],
        "rss_vs_target": auto["peak_rss_bytes"] / rows[target]["peak_rss_bytes"],
        "wall_vs_fastest": auto["wall_s"] / rows[fastest]["wall_s"],
    }
    return {"model": model, "modes": rows, "target": target, "fastest": fastest,
            "auto_ran": auto["values"], "ratios": ratios}  # fmt: skip


def _print(results: list[dict[str, Any]], limit: str) -> None:
    print(
        f"torchplace sim --values MODE, --host-memory-limit {limit}: wall seconds, peak RSS "
        f"(GB = 1e9 B); {platform.node()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}"
    )
    print(f"{'model':10} {'mode':12} {'wall s':>8} {'peak RSS':>9}  values       ended")
    for r in results:
        for mode in MODES:
            m = r["modes"][mode]
            print(
                f"{r['model']:10} {mode:12} {m['wall_s']:8.1f} {m['peak_rss_bytes'] / 1e9:8.2f}G"
                f"  {m['values'] or '-':12} {m['ended']}"
            )
        q = r["ratios"]
        right = r["auto_ran"] == r["target"]
        ok = right and max(q["wall_vs_target"], q["rss_vs_target"]) <= _GOAL
        print(
            f"{r['model']:10} auto ran {r['auto_ran']} (should: {r['target']}): wall "
            f"{q['wall_vs_target']:.2f}×, peak RSS {q['rss_vs_target']:.2f}× {r['target']}'s; "
            f"{q['wall_vs_fastest']:.2f}× the fastest mode's wall ({r['fastest']})  goal ≤ "
            f"{_GOAL}×: " + ("ok" if ok else "over")
        )
        reason = (r["modes"]["auto"]["values_decision"] or {}).get("reason", "")
        print(f"{'':10} why: {reason[:150]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--host-memory-limit", default="6GiB", help="passed to torchplace sim")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each case (medians)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.command[1:] if args.command[:1] == ["--"] else args.command)))
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-values-") as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        for model in args.models:
            cases = []
            for _ in range(args.rounds):
                for mode in MODES:
                    case = run_case(model, mode, script, args.host_memory_limit)
                    print(
                        f"  {model} {mode}: {case['wall_s']:.1f} s, "
                        f"{case['peak_rss_bytes'] / 1e9:.2f} GB, {case['ended']}",
                        file=sys.stderr,
                        flush=True,
                    )
                    cases.append(case)
            results.append(summarize(model, cases))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print(results, args.host_memory_limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
