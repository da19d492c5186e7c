"""``torch.cuda.set_sync_debug_mode`` on simulated GPUs (torchplace.sim.rules._sync_debug).

torch's own Python runs (argument checks, names); the bindings keep the mode; the syncs
CUDA's code checks (c10/cuda/CUDAFunctions.h memcpy_and_sync, stream_synchronize) warn or
raise "called a synchronizing CUDA operation", and the ones it does not check
(torch.cuda.synchronize, Event.synchronize) stay quiet.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from torchplace.sim import simulate


def _warnings(run: Callable[[], Any]) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    texts = [str(w.message) for w in caught]
    assert all(w.filename == __file__ for w in caught if "synchronizing" in str(w.message))
    return texts.count("called a synchronizing CUDA operation")


def test_each_sync_cuda_checks_warns_once_and_the_others_do_not() -> None:
    with simulate("A100 40GB"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        assert "prototype feature" in str(caught[0].message)
        assert torch.cuda.get_sync_debug_mode() == 1
        x = torch.randn(16, device="cuda")
        host = torch.randn(16)
        pinned = torch.randn(16).pin_memory()
        synchronizing = [
            lambda: x.sum().item(),
            lambda: x.cpu(),
            lambda: x.tolist(),
            lambda: bool(x[0] > 0),
            lambda: x[x > 0],  # nonzero
            lambda: torch.nonzero(x),
            lambda: host.cuda(),  # a blocking copy from the host, too
            lambda: torch.tensor([1.0, 2.0], device="cuda"),
            lambda: x.new_zeros(16).copy_(host),
            lambda: torch.cuda.current_stream().synchronize(),
        ]
        quiet = [
            lambda: x * 2,
            lambda: torch.randn(4, device="cuda"),
            lambda: pinned.cuda(non_blocking=True),
            lambda: x[torch.arange(3, device="cuda")],  # integer indices: no nonzero
            lambda: torch.cuda.synchronize(),  # cudaDeviceSynchronize: not checked
            lambda: torch.cuda.Event().synchronize(),
        ]
        counts = [_warnings(run) for run in synchronizing]
        assert counts == [1] * len(synchronizing)
        assert [_warnings(run) for run in quiet] == [0] * len(quiet)
        torch.cuda.set_sync_debug_mode("default")
        assert _warnings(lambda: x.sum().item()) == 0


def test_error_mode_raises_before_the_sync_and_bad_modes_are_refused() -> None:
    with simulate("A100 40GB") as report:
        x = torch.randn(4, device="cuda")
        torch.cuda.set_sync_debug_mode(2)
        with pytest.raises(RuntimeError, match=r"^called a synchronizing CUDA operation$"):
            x.sum().item()
        with pytest.raises(RuntimeError, match="called a synchronizing CUDA operation"):
            torch.randn(4).cuda()
        torch.cuda.set_sync_debug_mode(0)
        with pytest.raises(RuntimeError, match="expected one of 0,1,2"):
            torch.cuda.set_sync_debug_mode(3)
        with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
            torch.cuda.set_sync_debug_mode("loud")
        with pytest.raises(RuntimeError, match="invalid argument to set_sync_debug_mode"):
            torch.cuda.set_sync_debug_mode(1.5)  # type: ignore[arg-type]
        assert torch.cuda.get_sync_debug_mode() == 0
    # the refused item() was not counted: it never ran
    assert not [s for s in report.syncs if s["kind"] == "item"]


def test_each_simulation_starts_with_the_mode_off() -> None:
    with simulate("A100 40GB"):
        torch.cuda.set_sync_debug_mode("error")
    with simulate("A100 40GB"):
        assert torch.cuda.get_sync_debug_mode() == 0
        torch.randn(2, device="cuda").sum().item()
