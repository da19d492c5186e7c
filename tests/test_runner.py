"""The Runner in one process: device choice, setup, loader, precision steps, all_reduce."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    SubsetRandomSampler,
    TensorDataset,
)

from torchplace._devices import explain_auto
from torchplace.move import DeviceMismatchError
from torchplace.runner import DeviceLoader, Precision, Runner, _distributed, _loader, _runner

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """No torchrun variables leak in from the environment (restored after each test)."""
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TORCHPLACE_DEVICE", raising=False)


@pytest.fixture
def gloo_group(tmp_path: Path) -> Iterator[None]:
    """A real one-process gloo group started by the test (not by a Runner), then destroyed."""
    dist.init_process_group(
        "gloo", store=dist.FileStore(str(tmp_path / "s"), 1), rank=0, world_size=1
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def _data(n: int = 10) -> TensorDataset:
    return TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1), torch.arange(n))


# --- the device -------------------------------------------------------------------------


def test_auto_device_is_devices_auto_choice_with_its_reason() -> None:
    runner = Runner()
    assert (runner.device, runner.device_reason) == explain_auto()
    assert (runner.rank, runner.local_rank, runner.world_size, runner.is_main) == (0, 0, 1, True)
    assert repr(runner) == f"Runner(device='{runner.device}', precision='32', rank=0, world_size=1)"


def test_an_explicit_device_says_it_was_asked_for() -> None:
    runner = Runner(torch.device("cpu"))
    assert runner.device == CPU and "asked for" in runner.device_reason


def test_an_unavailable_device_is_the_devices_modules_error() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError, match="cuda"):
        Runner("cuda")


def _place(rank: int, local_rank: int, world: int) -> _distributed._Place:
    return _distributed._Place(rank=rank, local_rank=local_rank, world_size=world)


@pytest.mark.parametrize("spec", ["auto", "cuda", "gpu"])
def test_under_torchrun_each_process_takes_the_gpu_of_its_local_rank(
    monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    monkeypatch.setattr(_runner, "_cuda_device_count", lambda: 4)
    device, reason = _runner._choose_device(spec, _place(rank=5, local_rank=1, world=8))
    assert device == torch.device("cuda", 1)
    assert "process 5 of 8" in reason and "LOCAL_RANK=1" in reason


def test_under_torchrun_more_processes_than_gpus_is_an_error_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_runner, "_cuda_device_count", lambda: 2)
    with pytest.raises(RuntimeError, match=r"LOCAL_RANK=2.*only 2 visible GPUs.*--gpus 2"):
        _runner._choose_device("auto", _place(rank=2, local_rank=2, world=3))


def test_under_torchrun_without_gpus_every_process_uses_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_runner, "_cuda_device_count", lambda: 0)
    device, reason = _runner._choose_device("auto", _place(rank=1, local_rank=1, world=2))
    assert device == CPU and "no CUDA GPU" in reason and "gloo" in reason


def test_a_job_without_a_rendezvous_address_is_refused_before_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(
        RuntimeError, match=r"MASTER_ADDR and MASTER_PORT are not set.*torchplace run"
    ):
        Runner("cpu")
    assert not dist.is_initialized()


def test_a_broken_rank_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(RuntimeError, match=r"RANK='one' is not an integer"):
        Runner("cpu")


def test_a_group_started_by_the_user_is_used_and_kept(gloo_group: None) -> None:
    with Runner("cpu") as runner:
        assert (runner.rank, runner.world_size) == (0, 1)
    assert dist.is_initialized()  # the Runner did not start it, so it does not end it


# --- setup ------------------------------------------------------------------------------


def test_setup_returns_the_model_alone_or_with_the_optimizers() -> None:
    runner = Runner("cpu")
    model = nn.Linear(2, 2)
    assert runner.setup(model) is model
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    adam = torch.optim.Adam(model.parameters())
    assert runner.setup(model, sgd, adam) == (model, sgd, adam)


def test_setup_keeps_optimizer_state_that_already_exists() -> None:
    model = nn.Linear(2, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    before = {k: v.clone() for k, v in opt.state[model.weight].items()}
    Runner("cpu").setup(model, opt)
    after = opt.state[model.weight]
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)


def test_setup_refuses_a_model_spread_over_devices() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2, device="meta"))
    with pytest.raises(
        ValueError, match=r"spread over 2 devices: cpu \('0.weight'.*meta \('1.weight'"
    ):
        Runner("cpu").setup(model)


def test_setup_refuses_a_model_on_the_meta_device() -> None:
    with pytest.raises(ValueError, match=r"meta device \('weight'.*to_empty"):
        Runner("cpu").setup(nn.Linear(2, 2, device="meta"))


def test_setup_refuses_what_is_not_a_module_and_a_wrapped_model() -> None:
    runner = Runner("cpu")
    with pytest.raises(ValueError, match=r"takes an nn.Module as the model, got a Tensor"):
        runner.setup(torch.ones(2))  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"already wrapped in DataParallel.*model.module"):
        runner.setup(nn.DataParallel(nn.Linear(2, 2)))
    with pytest.raises(ValueError, match=r"argument 2 is a Linear"):
        runner.setup(nn.Linear(2, 2), nn.Linear(2, 2))  # type: ignore[call-overload]


def test_setup_names_a_tensor_attribute_that_does_not_move_with_the_model() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 2)
            self.mask = torch.ones(2, device="meta")  # a plain attribute, not a buffer

    with pytest.raises(DeviceMismatchError, match="mask"):
        Runner("cpu").setup(Masked())


# --- the step ---------------------------------------------------------------------------


def test_backward_and_step_train_and_zero_the_gradients() -> None:
    runner = Runner("cpu")
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    reference = nn.Linear(3, 1)
    reference.load_state_dict(model.state_dict())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    x = torch.randn(8, 3)

    with runner.autocast():
        loss = model(x).square().mean()
    runner.backward(loss)
    runner.step(opt)
    reference(x).square().mean().backward()
    ref_opt.step()

    assert model.weight.grad is None and model.bias.grad is None
    assert torch.allclose(model.weight, reference.weight) and torch.allclose(
        model.bias, reference.bias
    )


@pytest.fixture
def fp16_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """'16-mixed' resolved for the CPU (torch can autocast to float16 and scale on a CPU),
    so the GradScaler path runs here as it does on a GPU."""
    monkeypatch.setattr(
        _runner, "resolve_precision", lambda *a, **k: Precision("16-mixed", CPU, torch.float16)
    )


def test_16_mixed_scales_the_loss_and_steps_through_the_scaler(fp16_on_cpu: None) -> None:
    runner = Runner("cpu", precision="16-mixed")
    scaler = runner.scaler
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled()
    model = nn.Linear(3, 1)
    start = model.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 3)
    true_grad = torch.autograd.grad(model(x).square().mean(), model.weight)[0]

    runner.backward(model(x).square().mean())
    scale = scaler.get_scale()
    assert torch.allclose(model.weight.grad, true_grad * scale, rtol=1e-4)
    runner.step(opt)
    assert model.weight.grad is None
    assert torch.allclose(model.weight, start - 0.1 * true_grad, rtol=1e-4, atol=1e-6)


def test_16_mixed_skips_a_step_whose_gradients_overflowed_and_lowers_the_scale(
    fp16_on_cpu: None,
) -> None:
    runner = Runner("cpu", precision="16-mixed")
    assert runner.scaler is not None
    model = nn.Linear(3, 1)
    first, second = torch.optim.SGD([model.weight], lr=0.1), torch.optim.SGD([model.bias], lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    scale = runner.scaler.get_scale()
    runner.backward(model(torch.ones(1, 3)).sum() * float("inf"))
    runner.step(first, second)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert runner.scaler.get_scale() == scale * 0.5  # updated once, after both optimizers
    assert model.weight.grad is None and model.bias.grad is None


# --- all_reduce alone -------------------------------------------------------------------


def test_all_reduce_alone_returns_the_value_in_the_same_kind() -> None:
    runner = Runner("cpu")
    assert runner.all_reduce(3) == 3.0 and isinstance(runner.all_reduce(3), float)
    assert runner.all_reduce(3, op="sum") == 3 and isinstance(runner.all_reduce(3, "sum"), int)
    assert runner.all_reduce(0.1, op="max") == 0.1
    t = torch.tensor([1, 2])
    mean = runner.all_reduce(t)
    assert mean.dtype == torch.float32 and mean.tolist() == [1.0, 2.0]
    total = runner.all_reduce(t, op="sum")
    assert total.dtype == torch.int64 and total is not t


def test_all_reduce_refuses_unknown_ops_and_values() -> None:
    runner = Runner("cpu")
    with pytest.raises(ValueError, match=r"unknown op 'avg'"):
        runner.all_reduce(1.0, op="avg")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"combines tensors and numbers, got a str"):
        runner.all_reduce("1.0")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"got a bool"):
        runner.all_reduce(True)


# --- the loader -------------------------------------------------------------------------


def test_loader_alone_yields_batches_on_the_device_and_counts_epochs() -> None:
    runner = Runner("cpu")
    loader = runner.loader(DataLoader(_data(10), batch_size=4))
    assert isinstance(loader, DeviceLoader) and len(loader) == 3
    batches = list(loader)
    assert [len(x) for x, _ in batches] == [4, 4, 2]
    assert all(x.device == runner.device and y.device == runner.device for x, y in batches)
    assert loader.epoch == 1
    list(loader)
    assert loader.epoch == 2


def test_the_sampler_is_told_each_epoch_and_set_epoch_resumes_the_order() -> None:
    sampler = DistributedSampler(_data(16), num_replicas=2, rank=0, shuffle=True, seed=7)
    loader = DeviceLoader(DataLoader(_data(16), batch_size=8, sampler=sampler), CPU)
    orders = [next(iter(loader))[1].tolist() for _ in range(3)]
    assert sampler.epoch == 2 and orders[0] != orders[1]

    loader.set_epoch(1)
    assert next(iter(loader))[1].tolist() == orders[1]
    with pytest.raises(ValueError, match="counts from 0"):
        loader.set_epoch(-1)


def _settings(dl: DataLoader[Any]) -> tuple[Any, ...]:
    return (dl.batch_size, dl.drop_last, dl.collate_fn, dl.num_workers, dl.timeout, dl.generator)


def _collate(batch: list[Any]) -> Any:
    return torch.utils.data.default_collate(batch)


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_job_rebuilds_the_dataloader_with_a_distributed_sampler_keeping_its_settings(
    shuffle: bool,
) -> None:
    generator = torch.Generator().manual_seed(1234)
    original = DataLoader(
        _data(10),
        batch_size=2,
        shuffle=shuffle,
        drop_last=True,
        collate_fn=_collate,
        generator=generator,
    )
    shards = [_loader._prepare(original, rank=r, world_size=2, pin_memory=False) for r in (0, 1)]
    for rank, shard in enumerate(shards):
        assert isinstance(shard, DataLoader) and shard is not original
        assert _settings(shard) == _settings(original)
        sampler = shard.sampler
        assert isinstance(sampler, DistributedSampler)
        assert (sampler.rank, sampler.num_replicas, sampler.shuffle) == (rank, 2, shuffle)
        assert sampler.seed == (1234 if shuffle else 0)
    seen = [[int(i) for _, ids in shard for i in ids] for shard in shards]
    assert len(seen[0]) == len(seen[1]) == 4  # 5 indices each, batches of 2, drop_last
    assert not set(seen[0]) & set(seen[1])
    if not shuffle:
        assert (seen[0], seen[1]) == ([0, 2, 4, 6], [1, 3, 5, 7])


def test_a_loader_that_already_has_a_distributed_sampler_is_kept() -> None:
    dl = DataLoader(_data(), sampler=DistributedSampler(_data(), num_replicas=2, rank=1))
    assert _loader._prepare(dl, rank=1, world_size=2, pin_memory=False) is dl


def test_on_cuda_the_dataloader_is_rebuilt_to_pin_its_batches() -> None:
    dl = DataLoader(_data(), batch_size=3, shuffle=True)
    pinned = _loader._prepare(dl, rank=0, world_size=1, pin_memory=True)
    assert isinstance(pinned, DataLoader) and pinned.pin_memory
    assert pinned.sampler is dl.sampler and pinned.batch_size == 3
    assert _loader._prepare(dl, rank=0, world_size=1, pin_memory=False) is dl


def test_loaders_that_cannot_be_sharded_are_refused_with_the_way_out() -> None:
    class MyLoader(DataLoader[Any]):
        pass

    custom = DataLoader(_data(), sampler=SubsetRandomSampler(range(5)))
    batched = DataLoader(_data(), batch_sampler=[[0, 1], [2, 3]])
    cases = [
        (custom, r"would drop its SubsetRandomSampler"),
        (batched, r"its own batch_sampler"),
        (MyLoader(_data()), r"cannot rebuild a MyLoader.*DistributedSampler\(dataset\)"),
        ([1, 2, 3], r"got a list: pass a DataLoader"),
    ]
    for dl, message in cases:
        with pytest.raises(ValueError, match=message):
            _loader._prepare(dl, rank=0, world_size=2, pin_memory=False)


def test_an_iterable_dataset_in_a_job_is_kept_with_a_warning() -> None:
    class Stream(IterableDataset[int]):
        def __iter__(self) -> Iterator[int]:
            return iter(range(4))

    dl = DataLoader(Stream())
    with pytest.warns(UserWarning, match=r"IterableDataset.*each of the 2 processes sees all"):
        assert _loader._prepare(dl, rank=0, world_size=2, pin_memory=False) is dl


def test_on_cuda_the_next_batch_is_copied_on_a_side_stream_while_the_current_one_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    on_stream = [False]

    @contextlib.contextmanager
    def stream_context(stream: str) -> Iterator[None]:
        on_stream[0] = True
        yield
        on_stream[0] = False

    def move(batch: Any, device: torch.device) -> Any:
        assert on_stream[0], "batches must be copied on the side stream"
        events.append(f"copy {batch['i'].item()}")
        return batch

    monkeypatch.setattr(_loader, "_side_stream", lambda device: "side")
    monkeypatch.setattr(_loader, "_on_stream", stream_context)
    monkeypatch.setattr(_loader, "_move_to", move)
    monkeypatch.setattr(_loader, "_wait_for", lambda stream, device: events.append("wait"))
    monkeypatch.setattr(
        _loader, "_record_on_current", lambda t, device: events.append(f"record {t.numel()}")
    )
    batches = [{"i": torch.tensor(i), "x": [torch.ones(2), (torch.ones(3),)]} for i in range(3)]
    loader = DeviceLoader(batches, torch.device("cuda", 0))

    for batch in loader:
        events.append(f"use {batch['i'].item()}")
    assert events == [
        "copy 0",
        "wait", "record 1", "record 2", "record 3", "copy 1", "use 0",
        "wait", "record 1", "record 2", "record 3", "copy 2", "use 1",
        "wait", "record 1", "record 2", "record 3", "use 2",
    ]  # fmt: skip
