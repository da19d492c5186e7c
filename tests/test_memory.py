from __future__ import annotations

import dataclasses
import doctest
from collections import namedtuple
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torchplace import memory
from torchplace.memory import (
    AllocatorStats,
    allocator_stats,
    format_bytes,
    model_memory,
    parse_size,
    tensor_bytes,
)

CPU = torch.device("cpu")
META = torch.device("meta")


def test_docstring_examples_run() -> None:
    result = doctest.testmod(memory)
    assert result.attempted > 0
    assert result.failed == 0


# ---------------------------------------------------------------------- tensor_bytes


def test_tensor_counts_its_bytes_by_dtype() -> None:
    assert tensor_bytes(torch.zeros(10)) == {CPU: 40}
    assert tensor_bytes(torch.zeros(10, dtype=torch.float16)) == {CPU: 20}
    assert tensor_bytes(torch.zeros(10, dtype=torch.int64)) == {CPU: 80}


def test_views_of_one_storage_count_once() -> None:
    x = torch.zeros(100)
    assert tensor_bytes([x, x[10:20], x.view(10, 10), x.view(10, 10).t()]) == {CPU: 400}


def test_a_small_view_counts_the_whole_storage_it_keeps_alive() -> None:
    x = torch.zeros(1000)
    assert tensor_bytes(x[:1]) == {CPU: 4000}


def test_distinct_tensors_add_up() -> None:
    assert tensor_bytes([torch.zeros(10), torch.zeros(10)]) == {CPU: 80}


def test_a_clone_is_a_new_storage() -> None:
    x = torch.zeros(10)
    assert tensor_bytes([x, x.clone()]) == {CPU: 80}


class _TiedLM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(100, 16)  # 1600 floats
        self.norm = torch.nn.LayerNorm(16)  # 32 floats
        self.head = torch.nn.Linear(16, 100, bias=False)
        self.head.weight = self.embed.weight  # tied


def test_tied_weights_count_once() -> None:
    assert tensor_bytes(_TiedLM()) == {CPU: (1600 + 32) * 4}


def test_a_shared_layer_counts_once() -> None:
    layer = torch.nn.Linear(8, 8)  # 72 floats
    assert tensor_bytes(torch.nn.Sequential(layer, torch.nn.ReLU(), layer)) == {CPU: 288}


def test_module_buffers_are_counted() -> None:
    bn = torch.nn.BatchNorm1d(10)  # weight, bias, running mean/var (float32) + int64 counter
    assert tensor_bytes(bn) == {CPU: 4 * 10 * 4 + 8}


_Pair = namedtuple("_Pair", ["a", "b"])


@dataclasses.dataclass
class _Batch:
    x: torch.Tensor
    extra: Any = None


def test_nested_containers_are_walked() -> None:
    x = torch.zeros(4)  # 16 B
    y = torch.zeros(8)  # 32 B
    z = torch.zeros(2, dtype=torch.float64)  # 16 B
    obj = {
        "list": [x, (y,)],
        "pair": _Pair(x, z),
        "set": {y},
        "frozen": frozenset({z}),
        "batch": _Batch(x, extra={"again": y}),
        "text": "not a tensor",
        "number": 3,
    }
    assert tensor_bytes(obj) == {CPU: 64}


def test_cycles_and_non_tensors() -> None:
    loop: list[Any] = [torch.zeros(3)]
    loop.append(loop)
    assert tensor_bytes(loop) == {CPU: 12}
    assert tensor_bytes(None) == {}
    assert tensor_bytes("abc") == {}
    assert tensor_bytes(_Batch) == {}  # a dataclass type, not an instance


def test_meta_tensors_are_a_second_device() -> None:
    cpu = torch.zeros(10)
    meta = torch.empty(25, device="meta")
    other_meta = torch.empty(25, device="meta")  # same size, different storage
    result = tensor_bytes([cpu, meta, meta[5:], meta.view(5, 5), other_meta])
    assert result == {CPU: 40, META: 200}


def test_meta_model_and_tied_weights() -> None:
    with torch.device("meta"):
        model = _TiedLM()
    assert tensor_bytes(model) == {META: (1600 + 32) * 4}


def test_fake_tensors_count_on_the_device_they_report() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(100)
        view = x[:10]
    assert tensor_bytes([x, view]) == {x.device: 400}


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_sparse_tensors_count_indices_and_values() -> None:
    coo = torch.eye(5).to_sparse()  # 5 values (float32) + 2x5 indices (int64)
    assert tensor_bytes(coo) == {CPU: 5 * 4 + 10 * 8}
    crow, col, values = torch.arange(6), torch.arange(5), torch.ones(5)
    csr = torch.sparse_csr_tensor(crow, col, values, size=(5, 5), check_invariants=True)
    assert tensor_bytes(csr) == {CPU: 6 * 8 + 5 * 8 + 5 * 4}


# ---------------------------------------------------------------------- model_memory


def _param_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def test_model_without_gradients_or_optimizer() -> None:
    model = torch.nn.Linear(10, 5)
    m = model_memory(model)
    assert (m.parameters, m.gradients, m.buffers, m.optimizer_state) == (220, 0, 0, 0)
    assert m.total == 220
    assert dict(m.per_device) == {"cpu": 220}


def test_buffers_are_their_own_category() -> None:
    m = model_memory(torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.BatchNorm1d(10)))
    assert m.parameters == (110 + 20) * 4
    assert m.buffers == 20 * 4 + 8


def test_adam_after_one_step_holds_two_moments_and_step_scalars() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    params = _param_bytes(model)
    n_tensors = len(list(model.parameters()))
    m = model_memory(model, opt)
    assert m.parameters == params
    assert m.gradients == params
    assert m.optimizer_state == 2 * params + 4 * n_tensors  # exp_avg, exp_avg_sq, step
    assert m.total == 4 * params + 4 * n_tensors
    assert m.to_dict() == {
        "parameters": params,
        "gradients": params,
        "buffers": 0,
        "optimizer_state": 2 * params + 4 * n_tensors,
        "total": m.total,
        "per_device": {"cpu": m.total},
    }


def test_sgd_momentum_state() -> None:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    assert model_memory(model, opt).optimizer_state == _param_bytes(model)


def test_optimizer_before_its_first_step_holds_nothing() -> None:
    model = torch.nn.Linear(4, 4)
    assert model_memory(model, torch.optim.Adam(model.parameters())).optimizer_state == 0


def test_tied_weights_and_their_gradient_count_once() -> None:
    model = _TiedLM()
    model.head(model.norm(model.embed(torch.tensor([1, 2, 3])))).sum().backward()
    m = model_memory(model)
    assert m.parameters == (1600 + 32) * 4
    assert m.gradients == (1600 + 32) * 4


def test_optimizer_state_that_aliases_a_parameter_is_not_counted_twice() -> None:
    model = torch.nn.Linear(4, 4, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    (weight,) = model.parameters()
    opt.state[weight]["alias"] = weight.detach()  # same storage as the parameter
    opt.state[weight]["own"] = torch.zeros(3)
    m = model_memory(model, opt)
    assert m.parameters == 64
    assert m.optimizer_state == 12


def test_per_device_with_meta_and_cpu_parts() -> None:
    model = torch.nn.Linear(10, 10)  # 440 B on cpu
    model.register_buffer("mask", torch.empty(50, device="meta"))  # 200 B on meta
    m = model_memory(model)
    assert dict(m.per_device) == {"cpu": 440, "meta": 200}
    assert m.buffers == 200
    assert m.total == 640


def test_model_memory_rejects_wrong_types() -> None:
    with pytest.raises(ValueError, match=r"expects a torch\.nn\.Module, got dict"):
        model_memory({"w": torch.zeros(2)})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"optimizer must be a torch\.optim\.Optimizer"):
        model_memory(torch.nn.Linear(2, 2), optimizer=[1])  # type: ignore[arg-type]


# ------------------------------------------------------------------- allocator_stats


def test_allocator_stats_is_none_on_cpu_and_meta() -> None:
    assert allocator_stats("cpu") is None
    assert allocator_stats(torch.device("meta")) is None


def _no_accelerators(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_cuda_available", lambda: False)
    monkeypatch.setattr(memory, "_xpu_available", lambda: False)
    monkeypatch.setattr(memory, "_mps_available", lambda: False)
    monkeypatch.setattr(memory, "_accelerator_type", lambda: None)


def test_allocator_stats_is_none_for_absent_accelerators(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_accelerators(monkeypatch)
    assert allocator_stats() is None
    for device in ("cuda", "cuda:1", 0, "xpu", "mps", "hpu"):
        assert allocator_stats(device) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the path without a CUDA device")
def test_allocator_stats_without_cuda_does_not_initialise_it() -> None:
    assert allocator_stats("cuda") is None
    assert not torch.cuda.is_initialized()


_CUDA_STATS = {
    "allocated_bytes.all.current": 1024,
    "reserved_bytes.all.current": 2 * 1024**2,
    "allocated_bytes.all.peak": 4096,
    "reserved_bytes.all.peak": 4 * 1024**2,
    "num_alloc_retries": 0,
}


def _fake_cuda(monkeypatch: pytest.MonkeyPatch, stats: dict[str, Any], *, current: int = 0) -> None:
    _no_accelerators(monkeypatch)
    asked: list[int] = []

    def memory_stats(index: int) -> dict[str, Any]:
        asked.append(index)
        return stats

    monkeypatch.setattr(memory, "_cuda_available", lambda: True)
    monkeypatch.setattr(memory, "_cuda_device_count", lambda: 2)
    monkeypatch.setattr(memory, "_cuda_current_index", lambda: current)
    monkeypatch.setattr(memory, "_cuda_memory_stats", memory_stats)


def test_allocator_stats_cuda_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch, _CUDA_STATS, current=1)
    expected = AllocatorStats("cuda:1", 1024, 2 * 1024**2, 4096, 4 * 1024**2)
    assert allocator_stats() == expected  # the current device
    assert allocator_stats("cuda") == expected
    assert allocator_stats(1) == expected
    assert allocator_stats("cuda:0") == dataclasses.replace(expected, device="cuda:0")
    assert allocator_stats("cuda:2") is None  # only two devices
    assert allocator_stats("cuda:1").to_dict() == {  # type: ignore[union-attr]
        "device": "cuda:1",
        "allocated": 1024,
        "reserved": 2 * 1024**2,
        "peak_allocated": 4096,
        "peak_reserved": 4 * 1024**2,
    }


def test_allocator_stats_cuda_before_first_allocation_is_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_cuda(monkeypatch, {})
    assert allocator_stats("cuda") == AllocatorStats("cuda:0", 0, 0, 0, 0)


def test_allocator_stats_missing_fields_are_none(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch, {"allocated_bytes.all.current": 5})
    assert allocator_stats("cuda") == AllocatorStats("cuda:0", 5, None, None, None)


def test_allocator_stats_mps_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_accelerators(monkeypatch)
    monkeypatch.setattr(memory, "_mps_available", lambda: True)
    monkeypatch.setattr(memory, "_mps_memory", lambda: (100, 300))
    expected = AllocatorStats("mps", 100, 300, None, None)
    assert allocator_stats() == expected
    assert allocator_stats("mps") == expected
    assert allocator_stats("cuda") is None


def test_allocator_stats_xpu_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_accelerators(monkeypatch)
    monkeypatch.setattr(memory, "_xpu_available", lambda: True)
    monkeypatch.setattr(memory, "_xpu_device_count", lambda: 1)
    monkeypatch.setattr(memory, "_xpu_memory_stats", lambda index: _CUDA_STATS)
    assert allocator_stats() == AllocatorStats("xpu:0", 1024, 2 * 1024**2, 4096, 4 * 1024**2)
    assert allocator_stats("xpu:1") is None


def test_allocator_stats_other_accelerator_through_torch_accelerator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_accelerators(monkeypatch)
    monkeypatch.setattr(memory, "_accelerator_type", lambda: "hpu")
    monkeypatch.setattr(memory, "_accelerator_memory_stats", lambda index: _CUDA_STATS)
    assert allocator_stats("hpu") == AllocatorStats("hpu:0", 1024, 2 * 1024**2, 4096, 4 * 1024**2)


@pytest.mark.parametrize("bad", ["cuda:x", "gpu", -1, True])
def test_allocator_stats_rejects_bad_devices(bad: Any) -> None:
    with pytest.raises(ValueError, match="device"):
        allocator_stats(bad)


@pytest.mark.gpu
def test_allocator_stats_on_a_real_gpu() -> None:
    x = torch.empty(1024**2, device="cuda")  # 4 MiB
    stats = allocator_stats(x.device)
    assert stats is not None
    assert stats.allocated is not None and stats.allocated >= 4 * 1024**2
    assert stats.reserved is not None and stats.reserved >= stats.allocated
    assert stats.peak_allocated is not None and stats.peak_allocated >= stats.allocated


# --------------------------------------------------------------------- format / parse


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (3 * 1024**2, "3.0 MiB"),
        (1024**2 - 1, "1.0 MiB"),  # 1023.999 KiB rounds up into the next unit
        (3 * 2**29, "1.50 GiB"),
        (80 * 1024**3, "80.00 GiB"),
        (2 * 1024**4, "2.00 TiB"),
        (-2048, "-2.0 KiB"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("24GB", 24 * 10**9),
        ("80 GB", 80 * 10**9),
        ("22.5GiB", 22_5 * 2**30 // 10),
        ("512MiB", 512 * 2**20),
        ("512 mib", 512 * 2**20),
        ("1e9", 10**9),
        ("1.5e3 KB", 1_500_000),
        ("123456789012345678", 123456789012345678),
        ("100b", 100),
        ("2 TiB", 2 * 2**40),
        ("1 tb", 10**12),
        ("4kb", 4000),
        ("4KiB", 4096),
        (" 7 ", 7),
        (".5 KiB", 512),
    ],
)
def test_parse_size(text: str, n: int) -> None:
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "GB", "abc", "12 XB", "1.2.3", "nan", "inf", "5 G", "1e"])
def test_parse_size_rejects_what_is_not_a_size(text: str) -> None:
    with pytest.raises(ValueError, match=r"Cannot read .* as a size; accepted: .*GiB"):
        parse_size(text)


@pytest.mark.parametrize("text", ["0", "0 GB", "-1GB", "-512", "0.1 B"])
def test_parse_size_rejects_zero_and_negative(text: str) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        parse_size(text)


def test_parse_size_rejects_absurd_sizes_and_non_strings() -> None:
    with pytest.raises(ValueError, match="larger than any memory"):
        parse_size("1e400")
    with pytest.raises(ValueError, match="must be a string"):
        parse_size(1024)  # type: ignore[arg-type]


@given(st.integers(min_value=1, max_value=2**60))
def test_parse_size_reads_plain_integers_exactly(n: int) -> None:
    assert parse_size(str(n)) == n


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["KB", "MiB", "GB", "TiB"]))
def test_parse_size_units(k: int, unit: str) -> None:
    factor = {"KB": 10**3, "MiB": 2**20, "GB": 10**9, "TiB": 2**40}[unit]
    assert parse_size(f"{k}{unit}") == parse_size(f"{k} {unit.lower()}") == k * factor


@given(st.integers(min_value=1, max_value=2**55))
def test_format_then_parse_round_trips_within_the_shown_precision(n: int) -> None:
    text = format_bytes(n)
    value, unit = text.split()
    decimals = len(value.partition(".")[2])
    unit_bytes = parse_size(f"1 {unit}")
    # the shown number is n / unit rounded to `decimals` places
    assert abs(parse_size(text) - n) <= 0.5 * 10**-decimals * unit_bytes + 0.5
