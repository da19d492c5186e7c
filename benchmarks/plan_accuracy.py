"""Per-rank peak memory of a simulated DDP / FSDP2 run against a real one, rank by rank.

``plan_train.py`` (a torchrun-style script) runs twice with 2 and 4 processes on this
machine's CPU, over gloo:

- measured: each rank on the CPU (``--device cpu --backend gloo``) under ``torch.profiler``
  with ``profile_memory=True``; its peak is the running sum of the CPU allocator's own
  alloc/free events (``[memory]``). Not the memory timeline of ``sim_accuracy.py``: that
  needs ``record_shapes=True``, under which the profiler keeps a weak reference to every
  tensor it records (``TensorMetadata::weak_self_``, torch/csrc/profiler/collection.h), and
  FSDP2's ``model.to_empty()``, which must swap its DTensor parameters in place
  (``torch.utils.swap_tensors``; Module._apply), then fails with "Couldn't swap
  Embedding.weight" ("Expected no weakrefs to t1's Tensor object");
- simulated: each rank under ``torchplace.simulate("H100", values="placeholder")`` with
  the script unchanged (``--device cuda --backend nccl``), as ``torchplace sim
  --nproc-per-node`` runs it: NCCL becomes torch's fake process group, and the simulator's
  peak of requested bytes (the tensors' sizes) less the cuBLAS workspace (a CPU has none)
  is the like-for-like figure. (``mode="real"`` runs the same with real values over gloo.)

Aligning the two: attention runs the math kernel on both sides (the simulator would
otherwise pick an H100's memory-efficient kernel); AdamW is ``foreach`` in the script
(CUDA's default). Gloo on the CPU works on the tensors it is given, except where it copies
into buffers of its own inside the C++ collective; those host allocations are outside the
simulated GPU (NCCL on a GPU writes into the tensors FSDP and DDP hand it), so the
measured side counts them and the simulated side does not: the table shows the difference.

FSDP2 on gloo: the all-gather and reduce-scatter are run by gloo's worker threads, which
allocate a temporary of the gathered size and release the collective's tensors when they
finish; on rank 0 a reduce-scatter input was freed later than FSDP2 frees it (one step's
reduce-scatter ledger differs by one buffer), so rank 0's measured peak varies from run to
run by up to two buffers above the simulated one, which follows FSDP2's own frees.

    python benchmarks/plan_accuracy.py            # tiny and GPT-2-small, worlds 2 and 4
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_train

TOLERANCE = 0.02


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _allocator_peak(prof: Any) -> int:
    """The peak of live bytes in the CPU allocator's own alloc/free events (``[memory]``,
    reported by c10's ``ProfiledCPUMemoryReporter``), in time order."""
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        if e.device_type() == torch.autograd.DeviceType.CPU:
            live += e.nbytes()
            peak = max(peak, live)
    return peak


def _worker(rank: int, world: int, port: int, mode: str, argv: list[str], out: str) -> None:
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )  # fmt: skip
    torch.set_num_threads(1)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if mode == "measured":
        from torch.profiler import ProfilerActivity, profile

        args = [*argv, "--device", "cpu", "--backend", "gloo"]
        with (
            sdpa_kernel(SDPBackend.MATH),
            profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
        ):  # fmt: skip
            plan_train.main(args)
        peak = _allocator_peak(prof)
    else:
        from torchplace.sim import simulate

        values = "real" if mode == "real" else "placeholder"
        with sdpa_kernel(SDPBackend.MATH), simulate("H100", gpus=world, values=values) as report:
            plan_train.main(argv)
            stats = torch.cuda.memory_stats()
        workspace = 32 * 2**20 if any("cuBLAS" in n["text"] for n in report.notes) else 0
        peak = stats["requested_bytes.all.peak"] - workspace
    Path(out, f"{mode}-{rank}.json").write_text(json.dumps(peak))


def run(world: int, mode: str, argv: list[str], *, timeout: float = 600) -> list[int]:
    """Each rank's peak bytes of one ``world``-process run of ``plan_train.py argv``.

    gloo's teardown can deadlock at exit (a gloo worker thread waiting for the GIL held by
    the thread that destroys the process group): once every rank has written its figure,
    ranks still alive after a grace period are stopped, so a measurement never hangs.
    """
    with tempfile.TemporaryDirectory() as out:
        args = (world, _free_port(), mode, argv, out)
        procs = mp.start_processes(_worker, args=args, nprocs=world, join=False)
        files = [Path(out, f"{mode}-{r}.json") for r in range(world)]
        deadline, written_at = time.monotonic() + timeout, None
        while not procs.join(timeout=1):  # raises if a rank failed
            if written_at is None and all(f.exists() for f in files):
                written_at = time.monotonic()
            if time.monotonic() > deadline or (written_at and time.monotonic() > written_at + 30):
                break
        for p in procs.processes:
            if p.is_alive():
                p.terminate()
        if not all(f.exists() for f in files):
            raise TimeoutError(f"a {world}-process {mode} run did not finish in {timeout:.0f} s")
        return [json.loads(f.read_text()) for f in files]


def compare(
    model: str, strategy: str, world: int, *, batch: int = 2, seq: int = 64, steps: int = 2
) -> list[dict]:
    argv = ["--model", model, "--strategy", strategy, "--batch", str(batch), "--seq", str(seq)]
    argv += ["--steps", str(steps)]
    measured, simulated = run(world, "measured", argv), run(world, "placeholder", argv)
    return [
        {
            "model": model,
            "strategy": strategy,
            "world": world,
            "rank": r,
            "measured": m,
            "simulated": s,
            "diff": (s - m) / m,
        }
        for r, (m, s) in enumerate(zip(measured, simulated, strict=True))
    ]


def main(models: list[str]) -> None:
    print(
        f"torch {torch.__version__}; peaks in MiB (2^20 B); diff = (simulated - measured)/measured"
    )
    head = ("model", "strategy", "world", "rank", "measured", "simulated", "diff")
    print("{:8} {:8} {:>5} {:>4} {:>9} {:>9} {:>7}".format(*head))
    worst = 0.0
    for model in models:
        for strategy in ("ddp", "fsdp"):
            for world in (2, 4):
                try:
                    rows = compare(model, strategy, world)
                except Exception as e:  # a case that cannot run is reported, not hidden
                    print(f"{model:8} {strategy:8} {world:>5}    - failed: {str(e)[-200:]!r}")
                    continue
                for r in rows:
                    worst = max(worst, abs(r["diff"]))
                    print(
                        f"{model:8} {strategy:8} {world:>5} {r['rank']:>4} "
                        f"{r['measured'] / 2**20:9.2f} {r['simulated'] / 2**20:9.2f} "
                        f"{100 * r['diff']:+6.2f}%",
                        flush=True,
                    )
    print(f"worst |diff|: {100 * worst:.2f}% (goal {100 * TOLERANCE:.0f}%)")


if __name__ == "__main__":
    main(sys.argv[1:] or ["tiny", "gpt2"])
