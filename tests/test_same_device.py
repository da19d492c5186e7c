"""check_same_device and guard_same_device, on CPU: the meta device makes real mismatches."""

from __future__ import annotations

from collections import UserDict
from typing import Any

import pytest
import torch
from torch import Tensor, nn

import torchplace
from torchplace.move import DeviceMismatchError, check_same_device, guard_same_device


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.pos = torch.zeros(4)  # the classic bug: not a registered buffer

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x) + self.pos


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(4, 2)
        self.register_buffer("scale", torch.ones(2))
        self.calls = 0

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.calls += 1
        return self.head(self.encoder(x)) * self.scale


def _register_pos(net: Net, device: str = "cpu") -> None:
    del net.encoder.pos
    net.encoder.register_buffer("pos", torch.zeros(4, device=device))


def _error(module: nn.Module, *args: Any, **kwargs: Any) -> DeviceMismatchError:
    with pytest.raises(DeviceMismatchError) as info:
        check_same_device(module, *args, **kwargs)
    return info.value


def test_everything_on_one_device_passes() -> None:
    net = Net()
    _register_pos(net)  # the fix
    check_same_device(net, torch.ones(1, 4), mask=torch.ones(1))
    net.to("meta")
    check_same_device(net, torch.ones(1, 4, device="meta"))


def test_error_is_a_runtime_error_with_expected_offenders_and_hint() -> None:
    net = Net()
    _register_pos(net)
    err = _error(net, torch.ones(1, 4, device="meta"))
    assert isinstance(err, RuntimeError)
    assert err.expected == torch.device("cpu")
    assert err.offenders == ("args[0]",)
    assert 'model.to("cpu")' in err.hint and 'torchplace.to(batch, "cpu")' in err.hint
    assert torchplace.DeviceMismatchError is DeviceMismatchError


def test_parameter_offenders_by_qualified_name_and_the_fix() -> None:
    net = Net()
    _register_pos(net)
    net.head.to("meta")  # 10 of 30 parameters: cpu keeps the most bytes
    err = _error(net, torch.ones(1, 4))
    text = str(err)
    assert text.startswith(
        "Net would fail with 'Expected all tensors to be on the same device': "
        "2 tensors are not on cpu (the device that holds most of its parameter bytes):"
    )
    assert "  parameters on meta: head.weight, head.bias\n" in text
    assert '    fix: model.to("cpu") moves every parameter and buffer' in text
    assert err.offenders == ("head.weight", "head.bias")


def test_buffer_offender() -> None:
    net = Net()
    _register_pos(net)
    net.register_buffer("scale", torch.ones(2, device="meta"))
    err = _error(net)
    assert "  buffer on meta: scale\n" in str(err)
    assert err.offenders == ("scale",)


def test_plain_tensor_attribute_is_named_with_the_register_buffer_fix() -> None:
    net = Net().to("meta")  # .to leaves encoder.pos behind on cpu
    err = _error(net, torch.ones(1, 4, device="meta"))
    text = str(err)
    assert "  attribute on cpu: encoder.pos\n" in text
    assert (
        'in Encoder.__init__ write self.register_buffer("pos", tensor) instead of '
        "self.pos = tensor" in text
    )
    assert err.offenders == ("encoder.pos",)


def test_tensor_inside_a_list_attribute() -> None:
    class Anchored(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.anchors = [torch.ones(2), torch.ones(2)]

    err = _error(Anchored().to("meta"))
    assert "  attributes on cpu: anchors[0], anchors[1]\n" in str(err)
    assert "in Anchored.__init__ register each one" in str(err)


def test_module_kept_in_a_plain_list_is_named_with_the_module_list_fix() -> None:
    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = nn.Linear(4, 4)
            self.heads = [nn.Linear(4, 1)]

    err = _error(Heads().to("meta"))
    text = str(err)
    assert "  tensors of unregistered modules on cpu: heads[0].weight, heads[0].bias\n" in text
    assert "nn.ModuleList or nn.ModuleDict" in text


def test_inputs_by_position_key_and_nesting_with_the_to_fix() -> None:
    net = Net()
    _register_pos(net)
    meta = torch.ones(1, 4, device="meta")
    err = _error(net, meta, {"labels": meta, "ok": torch.ones(1)}, mask=meta)
    text = str(err)
    assert "  inputs on meta: args[0], args[1]['labels'], kwargs['mask']\n" in text
    assert '    fix: torchplace.to(batch, "cpu") before calling the model' in text
    assert err.offenders == ("args[0]", "args[1]['labels']", "kwargs['mask']")


def test_input_container_with_its_own_to_method_is_looked_into() -> None:
    class Encoding(UserDict):  # type: ignore[type-arg]
        """Like transformers' BatchEncoding: a mapping that moves itself."""

        def to(self, device: Any) -> Encoding:
            return Encoding({k: v.to(device) for k, v in self.items()})

    model = nn.Linear(2, 2)
    err = _error(model, Encoding(input_ids=torch.ones(1, 2, device="meta")))
    assert err.offenders == ("args[0]['input_ids']",)


def test_several_attributes_share_one_fix_line() -> None:
    class TwoAttrs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.a = torch.ones(2)
            self.b = torch.ones(2)

    text = str(_error(TwoAttrs().to("meta")))
    assert "  attributes on cpu: a, b\n" in text
    assert 'self.register_buffer("a", tensor) instead of self.a = tensor (likewise' in text


def test_every_kind_at_once_in_order() -> None:
    net = Net()
    net.head.to("meta")
    net.encoder.proj.to("meta")  # now meta holds most parameter bytes
    net.register_buffer("scale", torch.ones(2))
    err = _error(net, torch.ones(1, 4), mask=torch.ones(2, device="meta"))
    assert err.expected == torch.device("meta")
    assert err.offenders == ("scale", "encoder.pos", "args[0]")
    text = str(err)
    assert text.index("buffer on cpu") < text.index("attribute on cpu") < text.index("input on")


def test_explicit_device_is_the_expected_one() -> None:
    net = Net()
    _register_pos(net)
    err = _error(net, device="meta")
    assert err.expected == torch.device("meta")
    assert "(the device asked for)" in str(err)
    assert len(err.offenders) == 6  # 4 parameters and 2 buffers


def test_explicit_device_without_index_matches_any_index() -> None:
    net = Net()
    _register_pos(net)
    check_same_device(net, torch.ones(1, 4), device=torch.device("cpu"))
    check_same_device(net, torch.ones(1, 4), device="cpu")


def test_zero_dim_cpu_tensors_are_allowed() -> None:
    net = Net().to("meta")
    _register_pos(net, "meta")
    net.encoder.temperature = torch.tensor(0.5)  # 0-dim cpu attribute
    check_same_device(net, torch.ones(1, 4, device="meta"), mask=torch.tensor(1.0))


def test_zero_dim_tensor_on_another_accelerator_is_not_allowed() -> None:
    model = nn.Linear(2, 2)
    err = _error(model, torch.tensor(1.0, device="meta"))
    assert err.offenders == ("args[0]",)


def test_expected_device_falls_back_to_buffers_then_inputs() -> None:
    buffers_only = nn.BatchNorm1d(2, affine=False).to("meta")
    err = _error(buffers_only, torch.ones(2, 2))
    assert err.expected == torch.device("meta")
    assert "most of its buffer bytes" in str(err)

    no_state = nn.ReLU()
    err = _error(no_state, torch.ones(8), torch.ones(1, device="meta"))
    assert err.expected == torch.device("cpu")
    assert "most of its input bytes" in str(err)
    check_same_device(no_state, "no tensors", 3)


def test_many_offenders_are_listed_with_a_count() -> None:
    model = nn.Sequential(*[nn.Linear(1, 1) for _ in range(8)])
    err = _error(model, device="meta")
    assert len(err.offenders) == 16
    assert "parameters on cpu: 0.weight, 0.bias, " in str(err)
    assert " and 6 more\n" in str(err)


def test_not_a_module_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"needs the nn\.Module that will run, not Tensor"):
        check_same_device(torch.ones(1), torch.ones(1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a device"):
        check_same_device(nn.Linear(1, 1), device="nowhere")


def test_guard_raises_before_forward_runs_and_can_be_removed() -> None:
    net = Net()
    _register_pos(net)
    handle = guard_same_device(net)
    assert net(torch.ones(1, 4)).shape == (1, 2)
    assert net.calls == 1
    with pytest.raises(DeviceMismatchError, match=r"kwargs\['mask'\]"):
        net(torch.ones(1, 4), mask=torch.ones(1, device="meta"))
    assert net.calls == 1  # the forward never started
    handle.remove()
    net(torch.ones(1, 4), mask=torch.ones(1, device="meta"))  # mask unused: runs
    assert net.calls == 2


def test_guard_names_the_unregistered_attribute_that_pytorch_would_trip_on() -> None:
    net = Net().to("meta")
    guard_same_device(net)
    with pytest.raises(DeviceMismatchError, match=r"attribute on cpu: encoder\.pos"):
        net(torch.ones(1, 4, device="meta"))


def test_guard_with_explicit_device_and_a_forward_keyword_named_device() -> None:
    class TakesDevice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x: Tensor, device: str = "cpu") -> Tensor:
            return self.lin(x)

    model = TakesDevice()
    guard_same_device(model, device="cpu")
    model(torch.ones(1, 2), device="anything")
    with pytest.raises(DeviceMismatchError, match=r"input on meta: args\[0\]"):
        model(torch.ones(1, 2, device="meta"), device="anything")


def test_guard_needs_a_module() -> None:
    with pytest.raises(ValueError, match=r"guard_same_device needs an nn\.Module"):
        guard_same_device("model")  # type: ignore[arg-type]


@pytest.mark.gpu
def test_gpu_guard_fires_where_pytorch_would_fail() -> None:
    net = Net().cuda()  # encoder.pos stays on cpu
    with pytest.raises(RuntimeError, match="same device"):
        net(torch.ones(1, 4, device="cuda"))  # what PyTorch says without the guard
    guard_same_device(net)
    with pytest.raises(DeviceMismatchError, match=r"attribute on cpu: encoder\.pos"):
        net(torch.ones(1, 4, device="cuda"))
