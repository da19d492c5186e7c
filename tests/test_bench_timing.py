"""The timing harness, checked with a fake clock and a fake device."""

from __future__ import annotations

import pytest
import torch

from torchplace.bench import timing

FAKE_GPU = torch.device("cuda", 0)


class _FakeMachine:
    """A clock that only moves when the fake work runs, and a device log."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, costs: list[float], steady: float) -> None:
        self.now = 0.0
        self.events: list[str] = []
        self.costs, self.steady = list(costs), steady
        monkeypatch.setattr(timing, "_synchronize", self.sync)
        monkeypatch.setattr(timing, "_clock", self.clock)

    def sync(self, device: torch.device) -> None:
        assert device == FAKE_GPU
        self.events.append("sync")

    def clock(self) -> float:
        self.events.append("clock")
        return self.now

    def work(self) -> None:
        self.events.append("fn")
        self.now += self.costs.pop(0) if self.costs else self.steady


def _blocks(events: list[str]) -> list[list[str]]:
    """The events between each pair of clock reads (start, end of a timed block)."""
    clocks = [i for i, e in enumerate(events) if e == "clock"]
    assert len(clocks) % 2 == 0
    return [events[a + 1 : b] for a, b in zip(clocks[::2], clocks[1::2], strict=True)]


def test_sync_on_both_sides_of_every_timed_block(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeMachine(monkeypatch, costs=[], steady=1e-3)
    timing.measure(fake.work, device=FAKE_GPU, block_time=2.5e-3, max_run_time=1.0)
    events = fake.events
    # every clock read comes right after the device was synchronised
    assert all(events[i - 1] == "sync" for i, e in enumerate(events) if e == "clock")
    blocks = _blocks(events)
    assert len(blocks) >= 1 + 5  # the sizing block, then at least min_runs
    for block in blocks:
        # the work, then a sync: the end clock waits for the device to finish it
        assert block[-1] == "sync" and set(block[:-1]) == {"fn"}
    assert [len(b) - 1 for b in blocks[1:]] == [3] * (len(blocks) - 1)  # ceil(2.5 ms / 1 ms)


def test_warmup_is_not_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    # first call 100 s (CUDA init, kernel load), then 1 ms
    fake = _FakeMachine(monkeypatch, costs=[100.0], steady=1e-3)
    t = timing.measure(fake.work, device=FAKE_GPU, warmup=1, block_time=1e-3)
    assert fake.events.index("fn") < fake.events.index("clock")  # warm-up before any clock
    assert t.median == pytest.approx(1e-3)
    assert t.iqr == pytest.approx(0.0, abs=1e-12)
    assert t.number_per_run == 1 and t.runs == 10  # min_run_time 10 ms of 1 ms blocks


def test_sizing_block_is_discarded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeMachine(monkeypatch, costs=[100.0, 50.0], steady=1e-3)
    t = timing.measure(fake.work, device=FAKE_GPU, warmup=1, block_time=1e-3)
    assert t.median == pytest.approx(1e-3)  # the 50 s second call sized the blocks only


def test_slow_calls_still_get_min_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeMachine(monkeypatch, costs=[], steady=10.0)
    t = timing.measure(fake.work, device=FAKE_GPU, max_run_time=1.0, min_runs=5)
    assert t.runs == 5 and t.number_per_run == 1 and t.median == pytest.approx(10.0)


def test_noisy_runs_continue_until_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeMachine(monkeypatch, costs=[1e-3, 1e-3], steady=0.0)
    pattern = [1e-3, 3e-3] * 1000  # IQR / median stays near 1: never confident
    fake.costs += pattern
    t = timing.measure(fake.work, device=FAKE_GPU, max_run_time=0.05, block_time=1e-3)
    assert t.iqr > 0.5 * t.median
    assert 0.05 <= t.runs * t.number_per_run * 2e-3 < 0.06  # stopped right after the budget


def test_cpu_is_not_synchronised_and_arguments_are_checked() -> None:
    timing._synchronize(torch.device("cpu"))  # a no-op, must not touch any accelerator
    with pytest.raises(ValueError, match="min_runs >= 2"):
        timing.measure(lambda: None, device=torch.device("cpu"), min_runs=1)
