"""torchplace.to and torchplace.where, on CPU: the meta device stands in as a second device."""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from collections import OrderedDict, defaultdict
from functools import cached_property
from typing import Any, NamedTuple

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

import torchplace
from torchplace.move import Placement, to, where

META = torch.device("meta")


class Pair(NamedTuple):
    x: Tensor
    label: str


@dataclasses.dataclass
class Batch:
    x: Tensor
    names: list[str]
    cached: Tensor = dataclasses.field(init=False)
    calls: int = dataclasses.field(default=0, init=False)

    def __post_init__(self) -> None:
        self.cached = self.x * 2
        self.calls += 1

    @cached_property
    def total(self) -> Tensor:
        return self.x.sum()


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: Tensor
    tag: str = "t"


@dataclasses.dataclass(frozen=True)
class FrozenInitVar:
    x: Tensor
    scale: dataclasses.InitVar[int]
    y: Tensor = dataclasses.field(init=False)

    def __post_init__(self, scale: int) -> None:
        object.__setattr__(self, "y", self.x * scale)


@dataclasses.dataclass(slots=True, frozen=True)
class Slotted:
    x: Tensor


class Movable:
    """An object with its own .to(), as a user's batch class may have."""

    def __init__(self, t: Tensor) -> None:
        self.t = t
        self.seen: list[torch.device] = []

    def to(self, device: torch.device) -> Movable:
        self.seen.append(device)
        return Movable(self.t.to(device))


class InPlace:
    """A .to() that moves in place and forgets to return self."""

    def __init__(self, t: Tensor) -> None:
        self.t = t

    def to(self, device: torch.device) -> None:
        self.t = self.t.to(device)


# ------------------------------------------------------------------ containers


def test_tensor_moves_and_tensor_already_there_is_the_same_object() -> None:
    t = torch.ones(3)
    assert to(t, "meta").device == META
    assert to(t, "cpu") is t
    assert to(t, torch.device("cpu")) is t
    m = torch.ones(2, device="meta")
    assert to(m, META) is m
    assert to({"m": m}, "meta")["m"] is m


def test_dict_list_tuple_are_rebuilt_with_their_types() -> None:
    batch = {"x": torch.ones(2), "rows": [torch.ones(1), (torch.zeros(1), "keep")]}
    out = to(batch, "meta")
    assert type(out) is dict and out is not batch
    assert type(out["rows"]) is list and type(out["rows"][1]) is tuple
    assert out["x"].device == META and out["rows"][0].device == META
    assert out["rows"][1][0].device == META and out["rows"][1][1] == "keep"
    assert batch["x"].device.type == "cpu"  # the input is left alone


def test_tensor_subclasses_inside_plain_containers_are_moved() -> None:
    weight = nn.Parameter(torch.ones(2))
    out = to({"w": weight, "rows": [weight, (weight, 1)]}, "meta")
    assert out["w"].device == out["rows"][0].device == out["rows"][1][0].device == META
    assert out["rows"][1][1] == 1 and weight.device.type == "cpu"


def test_ordered_dict_keeps_type_and_order() -> None:
    batch = OrderedDict([("b", torch.ones(1)), ("a", torch.ones(1))])
    out = to(batch, "meta")
    assert type(out) is OrderedDict and list(out) == ["b", "a"]
    assert all(v.device == META for v in out.values())


def test_defaultdict_keeps_type_and_default_factory() -> None:
    batch: defaultdict[str, Any] = defaultdict(list)
    batch["x"] = torch.ones(1)
    out = to(batch, "meta")
    assert type(out) is defaultdict and out.default_factory is list
    assert out["x"].device == META
    assert out["missing"] == []


def test_dict_subclass_and_list_subclass_keep_their_type() -> None:
    class MyDict(dict):  # type: ignore[type-arg]
        pass

    class MyList(list):  # type: ignore[type-arg]
        pass

    out = to(MyDict(x=MyList([torch.ones(1)])), "meta")
    assert type(out) is MyDict and type(out["x"]) is MyList
    assert out["x"][0].device == META


def test_container_that_cannot_be_rebuilt_is_a_clear_value_error() -> None:
    class NeedsTwo(list):  # type: ignore[type-arg]
        def __init__(self, a: Any, b: Any) -> None:
            super().__init__([a, b])

    with pytest.raises(ValueError, match=r"cannot rebuild a .*NeedsTwo.*\.to\(device\) method"):
        to(NeedsTwo(torch.ones(1), torch.ones(1)), "meta")


def test_namedtuple_keeps_type_and_fields() -> None:
    out = to([Pair(torch.ones(2), "cat")], "meta")
    assert type(out[0]) is Pair
    assert out[0].x.device == META and out[0].label == "cat"


def test_torch_size_passes_through() -> None:
    size = torch.Size([2, 3])
    assert to({"s": size}, "meta")["s"] is size


def test_dataclass_moves_every_field_including_init_false_without_rerunning_init() -> None:
    b = Batch(torch.ones(2), ["a"])
    assert b.total.item() == 2  # fill the cached_property from the cpu tensor
    out = to(b, "meta")
    assert type(out) is Batch and out is not b
    assert out.x.device == META and out.cached.device == META  # init=False field moved
    assert out.names == ["a"]
    assert out.calls == 1  # __post_init__ did not run again
    assert "total" not in vars(out)  # the stale cached value was dropped
    assert out.total.device == META
    assert b.x.device.type == "cpu" and b.cached.device.type == "cpu"


def test_frozen_dataclass_is_rebuilt() -> None:
    out = to({"f": Frozen(torch.ones(1))}, "meta")["f"]
    assert type(out) is Frozen and out.x.device == META and out.tag == "t"


def test_frozen_dataclass_with_initvar_and_init_false_field() -> None:
    f = FrozenInitVar(torch.ones(2), 3)
    out = to(f, "meta")
    assert out.x.device == META and out.y.device == META
    assert out.y.shape == (2,)


def test_slotted_frozen_dataclass() -> None:
    out = to(Slotted(torch.ones(1)), "meta")
    assert type(out) is Slotted and out.x.device == META


def test_unset_init_false_field_is_skipped() -> None:
    @dataclasses.dataclass
    class Lazy:
        x: Tensor
        later: Tensor = dataclasses.field(init=False)

    out = to(Lazy(torch.ones(1)), "meta")
    assert out.x.device == META and not hasattr(out, "later")


def test_object_with_to_method_moves_itself() -> None:
    m = Movable(torch.ones(1))
    out = to({"m": m}, "meta")["m"]
    assert isinstance(out, Movable) and out.t.device == META
    assert m.seen == [META]


def test_to_method_returning_none_gives_back_the_object() -> None:
    obj = InPlace(torch.ones(1))
    assert to([obj], "meta")[0] is obj
    assert obj.t.device == META


def test_module_moves_in_place_and_is_returned() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    out = to({"model": model}, "meta")
    assert out["model"] is model
    assert all(p.device == META for p in model.parameters())
    assert all(b.device == META for b in model.buffers())


def test_leaves_that_are_not_tensors_pass_through_untouched() -> None:
    leaves: list[Any] = ["s", b"b", 3, 2.5, None, True, 1j, torch.float16, object(), int]
    out = to(leaves, "meta")
    assert all(a is b for a, b in zip(out, leaves, strict=True))
    for leaf in leaves:
        assert to(leaf, "meta") is leaf


def test_a_class_with_a_to_attribute_is_not_called() -> None:
    assert to(torch.Tensor, "meta") is torch.Tensor


# ------------------------------------------------------------- cycles and depth


def test_cycle_is_a_value_error_naming_the_path() -> None:
    batch: dict[str, Any] = {"x": torch.ones(1), "rows": []}
    batch["rows"].append(batch)
    with pytest.raises(ValueError, match=r"contains itself \(obj\['rows'\]\[0\] is obj again\)"):
        to(batch, "meta")


def test_cycle_through_a_dataclass_is_found() -> None:
    @dataclasses.dataclass
    class Node:
        x: Tensor
        children: list[Any]

    node = Node(torch.ones(1), [])
    node.children.append(node)
    with pytest.raises(ValueError, match=r"obj\.children\[0\] is obj again"):
        to(node, "meta")


def test_cycle_with_explicit_non_blocking_is_found() -> None:
    loop: list[Any] = [torch.ones(1)]
    loop.append(loop)
    with pytest.raises(ValueError, match=r"obj\[1\] is obj again"):
        to(loop, "meta", non_blocking=False)


def test_deep_but_acyclic_nesting_moves() -> None:
    deep: Any = torch.ones(1)
    for _ in range(100):  # deeper than the fast path's cycle budget
        deep = [deep]
    out = to(deep, "meta")
    for _ in range(100):
        out = out[0]
    assert out.device == META


def test_shared_sub_container_is_not_a_cycle() -> None:
    shared = [torch.ones(1)]
    deep: Any = {"a": shared, "b": shared}
    for _ in range(20):
        deep = [deep, shared]
    out = to(deep, "meta")
    assert out[1][0].device == META


def test_nesting_deeper_than_the_recursion_limit_is_a_value_error() -> None:
    deep: Any = torch.ones(1)
    for _ in range(sys.getrecursionlimit() + 100):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper than Python's recursion limit"):
        to(deep, "meta")


# ------------------------------------------------------------ devices and errors


@pytest.mark.parametrize("bad", ["xyz", "cuda:-1", 1.5, None, True, -1])
def test_bad_device_is_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"device|not a device"):
        to(torch.ones(1), bad)


def test_bad_device_message_names_the_value_and_what_to_pass() -> None:
    with pytest.raises(ValueError, match=r"'xyz' is not a device torch can use here: .*'cuda:1'"):
        to(torch.ones(1), "xyz")


def test_copy_out_of_meta_is_a_runtime_error_with_the_reason() -> None:
    with pytest.raises(RuntimeError, match=r"could not move obj to cpu: .*meta") as info:
        to({"x": torch.ones(1, device="meta")}, "cpu")
    assert isinstance(info.value.__cause__, NotImplementedError)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_accelerator_is_a_runtime_error() -> None:
    with pytest.raises(
        RuntimeError, match=r"could not move obj to cuda:0: .*Check that cuda:0 exists"
    ):
        to([torch.ones(1)], "cuda:0")


def test_out_of_memory_is_raised_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    def oom(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(torch.Tensor, "to", oom)
    with pytest.raises(torch.OutOfMemoryError):
        to({"x": torch.ones(1)}, "meta")


def test_out_of_memory_while_copying_a_cycle_reports_the_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def oom(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        raise torch.OutOfMemoryError("out of memory")

    loop: list[Any] = [torch.ones(1)]
    loop.append(loop)
    monkeypatch.setattr(torch.Tensor, "to", oom)
    with pytest.raises(ValueError, match="contains itself"):
        to(loop, "meta")


# --------------------------------------------------------------- non_blocking


class _Recorder:
    """Records the (device, non_blocking) of every Tensor.to call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    rec = _Recorder()

    def fake_to(t: Tensor, device: Any, non_blocking: bool = False) -> Tensor:
        rec.calls.append((str(device), non_blocking))
        return t

    monkeypatch.setattr(torch.Tensor, "to", fake_to)
    return rec


def _pinned(monkeypatch: pytest.MonkeyPatch, pinned: bool) -> None:
    # pinning needs an accelerator; the policy only asks is_pinned()
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self, *a, **k: pinned)


@pytest.mark.parametrize("target", ["cuda:0", "xpu"])
def test_default_is_non_blocking_from_pinned_memory_to_an_accelerator(
    monkeypatch: pytest.MonkeyPatch, recorder: _Recorder, target: str
) -> None:
    _pinned(monkeypatch, True)
    to({"x": torch.ones(1), "y": [torch.ones(1)]}, target)
    assert [nb for _, nb in recorder.calls] == [True, True]


def test_default_is_blocking_from_pageable_memory(
    monkeypatch: pytest.MonkeyPatch, recorder: _Recorder
) -> None:
    _pinned(monkeypatch, False)
    to({"x": torch.ones(1), "y": (torch.ones(1),)}, "cuda:0")
    assert [nb for _, nb in recorder.calls] == [False, False]


@pytest.mark.parametrize("target", ["cpu", "mps", "meta"])
def test_default_is_blocking_towards_host_mps_and_meta(
    monkeypatch: pytest.MonkeyPatch, recorder: _Recorder, target: str
) -> None:
    _pinned(monkeypatch, True)
    to([torch.ones(1), {"y": torch.ones(1)}], target)
    assert [nb for _, nb in recorder.calls] == [False, False]


@pytest.mark.parametrize("target", ["cpu", "mps"])
def test_explicit_non_blocking_towards_host_is_downgraded_with_a_warning(
    recorder: _Recorder, target: str
) -> None:
    with pytest.warns(UserWarning, match=rf"non_blocking=True towards {target} .*zeros"):
        to([torch.ones(1), torch.ones(1)], target, non_blocking=True)
    assert [nb for _, nb in recorder.calls] == [False, False]


def test_explicit_non_blocking_to_an_accelerator_is_kept(recorder: _Recorder) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to([torch.ones(1)], "cuda:1", non_blocking=True)
        to([torch.ones(1)], "cuda:1", non_blocking=False)
    assert recorder.calls == [("cuda:1", True), ("cuda:1", False)]


def test_non_blocking_must_be_a_bool_or_none() -> None:
    with pytest.raises(ValueError, match="non_blocking must be True, False or None"):
        to(torch.ones(1), "cpu", non_blocking="yes")  # type: ignore[arg-type]


def test_module_gets_the_explicit_non_blocking(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    model = nn.Linear(1, 1)
    monkeypatch.setattr(model, "to", lambda device, **kw: seen.append(kw) or model)
    to([model], "cuda:0", non_blocking=True)
    to([model], "cuda:0")
    assert seen == [{"non_blocking": True}, {"non_blocking": False}]


# ------------------------------------------------------------------- hypothesis

_leaves = st.one_of(
    st.builds(lambda n: torch.ones(n), st.integers(0, 3)),
    st.text(max_size=3),
    st.integers(),
    st.none(),
    st.floats(allow_nan=False),
)


def _nest(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.text(max_size=3)
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4),
        st.dictionaries(keys, children, max_size=4).map(OrderedDict),
        st.builds(Pair, children, st.text(max_size=3)),
        st.builds(Frozen, children),
    )


def _assert_moved(original: Any, moved: Any, device: torch.device) -> None:
    if isinstance(original, Tensor):
        assert isinstance(moved, Tensor) and moved.device == device
        assert moved.shape == original.shape and moved.dtype == original.dtype
    elif isinstance(original, (list, tuple)):
        assert type(moved) is type(original) and len(moved) == len(original)
        for a, b in zip(original, moved, strict=True):
            _assert_moved(a, b, device)
    elif isinstance(original, dict):
        assert type(moved) is type(original) and list(moved) == list(original)
        for k in original:
            _assert_moved(original[k], moved[k], device)
    elif isinstance(original, Frozen):
        assert type(moved) is Frozen and moved.tag == original.tag
        _assert_moved(original.x, moved.x, device)
    else:
        assert moved is original  # anything else passes through untouched


@settings(max_examples=60, deadline=None)
@given(st.recursive(_leaves, _nest, max_leaves=25))
def test_random_nested_structures_keep_their_shape(data: Any) -> None:
    _assert_moved(data, to(data, "meta"), META)


@settings(max_examples=30, deadline=None)
@given(st.recursive(_leaves, _nest, max_leaves=25))
def test_random_nested_structures_on_the_slow_path(data: Any) -> None:
    # an explicit non_blocking=True skips the blocking fast path
    _assert_moved(data, to(data, "meta", non_blocking=True), META)


# ------------------------------------------------------------------------ where


def test_where_tensor() -> None:
    p = where(torch.ones(2, 3))
    assert p.bytes_per_device == {"cpu": 24}
    assert p.count_per_device == {"cpu": 1}
    assert p.device_of == {"tensor": "cpu"}
    assert not p.mixed


def test_where_counts_views_once() -> None:
    t = torch.ones(4, 4)
    p = where({"t": t, "row": t[1], "flat": t.view(-1), "other": torch.ones(2)})
    assert p.bytes_per_device == {"cpu": 64 + 8}
    assert p.count_per_device == {"cpu": 4}
    assert p.device_of["['row']"] == "cpu"


def test_where_counts_tied_weights_once_and_lists_both_names() -> None:
    model = nn.ModuleDict({"embed": nn.Embedding(10, 4), "head": nn.Linear(4, 10, bias=False)})
    model["head"].weight = model["embed"].weight
    p = where(model)
    assert set(p.device_of) == {"embed.weight", "head.weight"}
    assert p.bytes_per_device == {"cpu": 10 * 4 * 4}
    assert p.count_per_device == {"cpu": 2}


def test_where_module_parameters_and_buffers_by_qualified_name() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    p = where(model)
    assert p.device_of == {
        "0.weight": "cpu",
        "0.bias": "cpu",
        "1.weight": "cpu",
        "1.bias": "cpu",
        "1.running_mean": "cpu",
        "1.running_var": "cpu",
        "1.num_batches_tracked": "cpu",
    }
    assert not p.mixed


def test_where_flags_a_module_on_two_devices() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(2, 2).to("meta"))
    p = where(model)
    assert p.mixed
    assert p.devices == ["cpu", "meta"]  # most bytes first
    assert p.count_per_device == {"cpu": 2, "meta": 2}
    text = str(p)
    assert "mixed: tensors on 2 devices; not on cpu: 1.weight (meta), 1.bias (meta)" in text
    assert text.splitlines()[0].split() == ["device", "tensors", "bytes", "GiB"]
    assert "total" in text


def test_where_meta_tensors_have_no_data_but_are_counted_by_storage() -> None:
    m = torch.empty(4, 4, device="meta")
    p = where([m, m[0], torch.empty(2, device="meta")])
    assert p.bytes_per_device == {"meta": 64 + 8}
    assert p.count_per_device == {"meta": 3}


def test_where_fake_tensors() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        t = torch.empty(8, 8)
        p = where({"t": t, "view": t[2:]})
    assert p.bytes_per_device == {"cpu": 256}
    assert p.count_per_device == {"cpu": 2}


def test_where_sparse_tensor_does_not_crash() -> None:
    p = where(torch.eye(3).to_sparse())
    assert p.count_per_device == {"cpu": 1}
    assert p.bytes_per_device["cpu"] > 0


def test_where_module_inside_a_collection_and_paths() -> None:
    p = where({"model": nn.Linear(1, 1), "batch": [torch.ones(1)]})
    assert set(p.device_of) == {"['model'].weight", "['model'].bias", "['batch'][0]"}


def test_where_no_tensors() -> None:
    p = where({"name": "x", "n": 3})
    assert p == Placement()
    assert str(p) == "no tensors"
    assert not p.mixed and p.total_bytes == 0


def test_placement_to_dict_is_json_ready() -> None:
    p = where({"a": torch.ones(2), "b": torch.ones(3, device="meta")})
    d = p.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["devices"] == {"meta": {"tensors": 1, "bytes": 12}, "cpu": {"tensors": 1, "bytes": 8}}
    assert d["tensors"] == {"['a']": "cpu", "['b']": "meta"}
    assert d["total_bytes"] == 20 and d["mixed"] is True


def test_public_names_resolve_from_the_package() -> None:
    assert torchplace.to is to
    assert torchplace.where is where
    assert torchplace.Placement is Placement


# ------------------------------------------------------------------ real GPU


@pytest.mark.gpu
def test_gpu_pinned_batch_arrives_intact_with_the_default_policy() -> None:
    batch = {"x": torch.arange(1 << 20, dtype=torch.float32).pin_memory(), "n": 3}
    out = to(batch, "cuda")
    assert out["x"].is_cuda and out["n"] == 3
    assert torch.equal(out["x"].cpu(), batch["x"])


@pytest.mark.gpu
def test_gpu_copy_back_to_cpu_is_blocking_so_it_is_never_zeros() -> None:
    on_gpu = torch.arange(1, 1 + (1 << 22), device="cuda", dtype=torch.float32)
    with pytest.warns(UserWarning, match="non_blocking=True towards cpu"):
        back = to([on_gpu * 2], "cpu", non_blocking=True)[0]
    assert back.device.type == "cpu"
    assert back[0].item() == 2.0 and back[-1].item() == 2.0 * (1 << 22)


@pytest.mark.gpu
def test_gpu_where_sees_cuda_and_cpu() -> None:
    model = nn.Sequential(nn.Linear(4, 4).cuda(), nn.Linear(4, 4))
    p = where(model)
    assert p.mixed and set(p.devices) == {"cuda:0", "cpu"}
