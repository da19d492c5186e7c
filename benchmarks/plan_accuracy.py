"""Per-rank peak memory of a simulated DDP / FSDP2 run against a real one, rank by rank.

``plan_train.py`` (a torchrun-style script) runs twice with 2 and 4 processes on this
machine's CPU, over gloo:

- measured: each rank on the CPU (``--device cpu --backend gloo``) under ``torch.profiler``
  with ``profile_memory=True``; its peak is the highest running total of the CPU
  allocator's own alloc/free events (``[memory]``, "Total Allocated"), kept for every
  thread of the process (``_count_every_thread``), with gloo's worker threads made to
  release a collective's tensors before the caller goes on, as NCCL does
  (``_gloo_frees_on_the_calling_thread``). Not the memory timeline of
  ``sim_accuracy.py``: that needs ``record_shapes=True``, under which the profiler keeps
  a weak reference to every tensor it records (``TensorMetadata::weak_self_``,
  torch/csrc/profiler/collection.h), and FSDP2's ``model.to_empty()``, which must swap
  its DTensor parameters in place (``torch.utils.swap_tensors``; Module._apply), then
  fails with "Couldn't swap Embedding.weight" ("Expected no weakrefs to t1's Tensor
  object");
- simulated: each rank under ``torchplace.simulate("H100", values="placeholder")`` with
  the script unchanged (``--device cuda --backend nccl``), as ``torchplace sim
  --nproc-per-node`` runs it: NCCL becomes torch's fake process group, and the simulator's
  peak of requested bytes (the tensors' sizes) less the cuBLAS workspace (a CPU has none)
  is the like-for-like figure. (``mode="real"`` runs the same with real values over gloo.)

Aligning the two: attention runs the math kernel on both sides (the simulator would
otherwise pick an H100's memory-efficient kernel); AdamW is ``foreach`` in the script
(CUDA's default); FSDP2's ``torch._chunk_cat`` copies into its output as CUDA's kernel
does, without the CPU kernel's padded copies (``_chunk_cat``). Gloo allocates buffers of
its own inside a collective (``_reduce_scatter_base`` clones its whole input; an
all-gather allocates gathered-size buffers on the calling thread and on gloo's worker);
NCCL writes into the tensors FSDP and DDP hand it, and what it allocates for itself is
outside the caching allocator, so the measured peak is given without gloo's buffers
(compared) and with them (``+gloo``, shown).

FSDP2 on gloo, before these measures, a sum of ``[memory]`` events put rank 0's or rank
1's peak, from run to run, exact or one or two FSDP2 buffers (262,656 B each for the tiny
model) above the simulated one (−5.3 %, −10.1 %). Three gloo causes, none a GPU's: (1)
frees on gloo's worker thread are not recorded, so the sum kept those blocks live to the
end of the run (an address allocated again with no free between shows it); (2) gloo's
own buffers overlapped the peak or not, by timing (the worker's gathered-size buffer of a
prefetched all-gather runs beside the backward); (3) the worker sometimes released an
all-gather output after FSDP2 had dropped it. With all three handled, every rank of the
full table (``tiny gpt2``) within 1,388 B of the simulated one, the same bytes run to
run; README, "Plan a run".

    python benchmarks/plan_accuracy.py            # tiny and GPT-2-small, worlds 2 and 4
"""

from __future__ import annotations

import argparse
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


def _count_every_thread() -> None:
    """Have c10's CPU allocator keep its running total for allocations and frees on every
    thread of this process, not only on those the profiler records.

    ``ProfiledCPUMemoryReporter`` (c10/core/CPUAllocator.cpp) updates its table of live
    blocks and its total only where ``memoryProfilingEnabled()`` holds, a thread-local set
    by the profiler, or where ``FLAGS_caffe2_report_cpu_memory_usage`` is set. A block
    freed on one of gloo's worker threads, outside the profiler's thread-local state, has
    no ``[memory]`` event and would stay live in a sum of events to the end of the run;
    with the flag set (c10's own flag, exported by libc10), each event's "Total
    Allocated" counts it. Set just before profiling, so the total starts from zero.
    """
    import ctypes

    lib_dir = Path(torch.__file__).parent / "lib"
    for name in ("libc10.so", "libc10.dylib", "c10.dll"):
        if (lib_dir / name).exists():
            lib = ctypes.CDLL(str(lib_dir / name))
            ctypes.c_bool.in_dll(lib, "FLAGS_caffe2_report_cpu_memory_usage").value = True
            return
    raise RuntimeError(f"no c10 library in {lib_dir}: cannot count frees on gloo's threads")


_RELEASED = "plan_accuracy::released"  # marks where a Work.wait() returns (measured side)
# ProcessGroup methods of the collectives distributed_c10d calls for FSDP2 and DDP
_COLLECTIVES = (
    "all_gather_single", "reduce_scatter_single", "allreduce", "allgather", "broadcast",
    "all_gather_single_coalesced", "reduce_scatter_single_coalesced", "allreduce_coalesced",
    "allgather_coalesced", "_allgather_base", "_reduce_scatter_base",
)  # fmt: skip


def _allocator_peaks(trace: Path) -> dict[str, int]:
    """Two peaks of the CPU allocator's running total ("Total Allocated" of its
    ``[memory]`` events in the profiler's trace; every thread's allocations and frees
    counted, ``_count_every_thread``):

    - ``with_gloo``: the total itself;
    - ``peak``: less the blocks gloo allocates for itself inside a collective (an
      allocation inside a ``c10d::`` or ``gloo:`` op, e.g. ``_reduce_scatter_base``'s
      clone of its whole input, or the gathered-size buffer of an all-gather), from their
      allocation to their free: the recorded one, or, where it has no event (freed on a
      thread the profiler does not record), the first drop of the running total between
      two events that it fits, its address being allocated again, or at the latest the
      next ``Work.wait()`` return, by which gloo has released it
      (``_gloo_frees_on_the_calling_thread``). NCCL writes into the tensors it is handed,
      and what it allocates for itself is outside the caching allocator, so this is the
      figure a GPU's allocator has and the simulated rank's counterpart.
    """
    import bisect

    events = json.loads(trace.read_text())["traceEvents"]
    memory = sorted(
        (e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0),
        key=lambda e: e["ts"],
    )
    spans: dict[Any, list[tuple[float, float]]] = {}
    released: list[float] = []
    for e in events:
        if e.get("ph") != "X":
            continue
        if e["name"].startswith(("c10d::", "gloo:")):
            spans.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
        elif e["name"] == _RELEASED:
            released.append(e["ts"])
    released.sort()
    starts = {tid: sorted(v) for tid, v in spans.items()}

    def in_collective(ts: float, tid: Any) -> bool:
        v = starts.get(tid, [])
        i = bisect.bisect_right(v, (ts, float("inf")))
        return any(lo <= ts <= hi for lo, hi in v[max(0, i - 8) : i])

    # gloo's blocks, live from their allocation to their free: the recorded one; or one
    # the running total shows between two events without an event of its own (a free on
    # a thread the profiler does not record), matched by size; or, failing both, the next
    # Work.wait() return
    live: dict[Any, int] = {}  # address -> bytes, gloo's blocks not yet freed
    unseen: list[tuple[Any, float]] = []  # (address, deadline) of those, oldest first
    with_gloo = peak = gloo_live = previous = 0
    for e in memory:
        a, ts = e["args"], e["ts"]
        total = a["Total Allocated"]
        hidden = -(total - previous - a["Bytes"]) if previous else 0
        previous = total
        for addr, deadline in list(unseen):  # released by now
            if addr in live and deadline <= ts:
                gloo_live -= live.pop(addr)
        if hidden > 0:
            match = [ad for ad, _ in reversed(unseen) if live.get(ad) == hidden][:1]
            for addr in match or [ad for ad, _ in reversed(unseen) if ad in live]:
                if addr in live and live[addr] <= hidden:
                    hidden -= live[addr]
                    gloo_live -= live.pop(addr)
        if a["Bytes"] > 0 and a["Addr"] in live:  # its address is allocated again: freed
            gloo_live -= live.pop(a["Addr"])
        unseen = [(ad, d) for ad, d in unseen if ad in live]
        if a["Bytes"] > 0 and in_collective(ts, e["tid"]):
            j = bisect.bisect_right(released, ts)
            live[a["Addr"]] = a["Bytes"]
            unseen.append((a["Addr"], released[j] if j < len(released) else float("inf")))
            gloo_live += a["Bytes"]
        elif a["Bytes"] < 0 and a["Addr"] in live:
            gloo_live -= live.pop(a["Addr"])
        with_gloo = max(with_gloo, total)
        peak = max(peak, total - gloo_live)
    return {"peak": peak, "with_gloo": with_gloo}


def _gloo_frees_on_the_calling_thread() -> None:
    """Make every gloo process group of this (measured) rank release a collective's
    tensors before the ``Work.wait()`` that returns it, on the thread that called it.

    Gloo runs a collective on a worker thread of its own, and the worker drops its
    reference to the collective's ``AsyncWork`` (its input and output tensors, and
    temporaries such as ``_reduce_scatter_base``'s clone of the input) only after the
    collective finished: ``workInProgress_[workerIndex].reset()`` in
    ``ProcessGroupGloo::runLoop`` (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp),
    after ``AsyncWork::execute`` has already woken the waiting thread. The main thread
    runs on meanwhile; where it drops its own references first (FSDP2 frees an all-gather
    output right after copying out of it), the worker's release is the free, late by as
    long as the worker takes to get there (it competes for the CPU and, to release Python
    state the work captured, e.g. the ``ThreadLocalState`` that
    ``at::wrapPropagateTLSState`` keeps for the profiler's callbacks, for the GIL). That
    free also happens where the profiler does not record it (``_count_every_thread``).

    NCCL on a GPU frees at the user's own drop: the copy of the work its watchdog thread
    keeps has no outputs (``ProcessGroupNCCL::workEnqueue``, "Here we enqueue work
    without outputs_"), and the tensors it stashes for the allocator's safety are cleared
    by the user's ``work.wait()`` ("the earlier the better, i.e. user calling
    `work.wait`", ``WorkNCCL``'s copy constructor; torch/csrc/distributed/c10d/
    ProcessGroupNCCL.cpp). To measure that, each gloo group here has one worker thread,
    and after each ``Work.wait()`` returns (or a synchronous collective, waited for in
    C++, returns), a ``barrier`` on every gloo group runs through that worker, which
    reaches it only once it has released the previous work: by then the caller holds the
    last references, and frees them where FSDP2 drops them. The barrier holds no tensors;
    it only orders the worker's release before the caller goes on.
    """
    import torch.distributed.distributed_c10d as c10d
    from torch._C._distributed_c10d import ProcessGroup, ProcessGroupGloo, Work

    # strong references: C++ keeps a group alive, not its Python wrapper (a weak set
    # here empties itself); released when the script destroys its process groups
    groups: list[Any] = []

    class OneThreadGloo(ProcessGroupGloo):
        def __init__(self, store: Any, rank: int, size: int, timeout: Any) -> None:
            opts = ProcessGroupGloo._Options()
            opts._devices = [ProcessGroupGloo.create_default_device()]
            opts._threads = 1
            opts._timeout = timeout
            super().__init__(store, rank, size, opts)
            groups.append(self)

    wait, destroy = Work.wait, c10d.destroy_process_group

    def release() -> None:
        for group in groups:
            wait(group.barrier())
        with torch.profiler.record_function(_RELEASED):
            pass

    def wait_then_release(self: Work, *args: Any, **kwargs: Any) -> bool:
        done = wait(self, *args, **kwargs)
        release()
        return done

    def release_after(name: str) -> None:
        # a synchronous collective (async_op=False) may be waited for in C++ and return
        # no Work (distributed_c10d.all_gather_single: "the backend has sync'ed at CPP
        # level"): release after it returns
        method = getattr(ProcessGroup, name)

        def call(self: ProcessGroup, *args: Any, **kwargs: Any) -> Any:
            work = method(self, *args, **kwargs)
            if work is None:
                release()
            return work

        setattr(ProcessGroup, name, call)

    for name in _COLLECTIVES:
        if hasattr(ProcessGroup, name):
            release_after(name)

    def destroy_process_group(*args: Any, **kwargs: Any) -> None:
        # DDP waits for its all-reduces in C++: let the worker release the last one (its
        # captured thread-local state needs the GIL) before anything can join the worker
        # while holding the GIL (~ProcessGroupGloo from DDP's ~Reducer: a hang seen here)
        release()
        groups.clear()
        destroy(*args, **kwargs)

    c10d.ProcessGroupGloo = OneThreadGloo
    c10d.destroy_process_group = destroy_process_group
    torch.distributed.destroy_process_group = destroy_process_group
    Work.wait = wait_then_release


def _chunk_cat(tensors: list[torch.Tensor], dim: int, num_chunks: int, *, out: Any = None) -> Any:
    """``torch._chunk_cat`` as CUDA's kernel runs it: straight into ``out``.

    FSDP2 copies its unsharded gradients into the reduce-scatter input with
    ``torch._chunk_cat(..., out=...)`` (``foreach_reduce_scatter_copy_in``). On CUDA a
    kernel copies each chunk into ``out`` ("[CUDA kernel for chunk_cat_cuda]",
    aten/src/ATen/native/cuda/TensorShape.cu); the CPU's ``_chunk_cat`` first pads every
    gradient into a new tensor (``new_zeros``, aten/src/ATen/native/TensorShape.cpp), so
    for GPT-2 small it holds a second copy of the root's gradients, 294 MiB, at the root's
    reduce-scatter. Same values, without the CPU's temporaries.
    """
    if out is None or dim != 0 or not all(t.dim() and t.is_contiguous() for t in tensors):
        return torch._C._VariableFunctions._chunk_cat(tensors, dim, num_chunks, out=out)
    rows, col = out.view(num_chunks, -1), 0
    for t in tensors:
        lead = t.size(0)
        per, inner = -(-lead // num_chunks), t.numel() // max(lead, 1)
        flat = t.view(lead, inner)
        for c in range(num_chunks):
            dst = rows[c, col : col + per * inner]
            lo, hi = min(c * per, lead), min((c + 1) * per, lead)
            dst[: (hi - lo) * inner].copy_(flat[lo:hi].view(-1))
            dst[(hi - lo) * inner :].zero_()
        col += per * inner
    return out


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
        _gloo_frees_on_the_calling_thread()
        torch._chunk_cat = _chunk_cat
        _count_every_thread()
        with (
            sdpa_kernel(SDPBackend.MATH),
            profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
        ):  # fmt: skip
            plan_train.main(args)
        trace = Path(out, f"trace-{rank}.json")
        prof.export_chrome_trace(str(trace))
        peaks = _allocator_peaks(trace)
        trace.unlink()
    else:
        from torchplace.sim import simulate

        values = "real" if mode == "real" else "placeholder"
        with sdpa_kernel(SDPBackend.MATH), simulate("H100", gpus=world, values=values) as report:
            plan_train.main(argv)
            stats = torch.cuda.memory_stats()
        workspace = 32 * 2**20 if any("cuBLAS" in n["text"] for n in report.notes) else 0
        peaks = {"peak": stats["requested_bytes.all.peak"] - workspace}
    Path(out, f"{mode}-{rank}.json").write_text(json.dumps(peaks))


def run(world: int, mode: str, argv: list[str], *, timeout: float = 600) -> list[dict[str, int]]:
    """Each rank's peak bytes of one ``world``-process run of ``plan_train.py argv``:
    ``{"peak": ...}``, and for ``mode="measured"`` also ``"with_gloo"`` (``_allocator_peaks``).

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
            "measured": m["peak"],
            "measured_with_gloo": m["with_gloo"],
            "simulated": s["peak"],
            "diff": (s["peak"] - m["peak"]) / m["peak"],
        }
        for r, (m, s) in enumerate(zip(measured, simulated, strict=True))
    ]


def main(models: list[str]) -> None:
    print(
        f"torch {torch.__version__}; peaks in MiB (2^20 B); diff = (simulated - measured)/measured;"
        " +gloo: the measured peak with gloo's own buffers"
    )
    head = ("model", "strategy", "world", "rank", "measured", "+gloo", "simulated", "diff")
    print("{:8} {:8} {:>5} {:>4} {:>10} {:>10} {:>10} {:>8}".format(*head))
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
                        f"{r['measured'] / 2**20:10.2f} {r['measured_with_gloo'] / 2**20:10.2f} "
                        f"{r['simulated'] / 2**20:10.2f} {100 * r['diff']:+7.3f}%  "
                        f"({r['measured']:,} / {r['simulated']:,} B)",
                        flush=True,
                    )
    print(f"worst |diff|: {100 * worst:.3f}% (goal {100 * TOLERANCE:.0f}%)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="Each simulated rank's peak against a real gloo run of the same training "
        "step (DDP and FSDP2, worlds 2 and 4)."
    )
    parser.add_argument(
        "models",
        nargs="*",
        choices=("tiny", "gpt2"),
        default=["tiny", "gpt2"],
        help="models to compare (default: tiny gpt2)",
    )
    main(parser.parse_args().models)
