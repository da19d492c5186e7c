"""Real values and host memory (issue 27): every operation is checked before it runs.

An operation whose outputs would not fit the simulated GPU raises CUDA's out-of-memory
error at the user's line; one that fits the GPU but not the host stops with
``HostMemoryError`` (``values="real"``) or goes on with placeholder values from that line,
in place (``values="auto"``) — before the host allocates anything. The operations here
would need tens of GiB: had the host computed them, the test process would have died.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from test_sim_values import _train
from torchplace.sim import HostMemoryError, simulate
from torchplace.sim.accounting import _hostmem

MiB = 1024**2
GiB = 1024**3


def _outer(n: int) -> torch.Tensor:
    """An n × n float32 outer product from two n-element vectors: inputs of kilobytes, an
    output of n² × 4 bytes (a matrix product's output is not bounded by its inputs)."""
    a = torch.randn(n, 1, device="cuda")
    b = torch.randn(1, n, device="cuda")
    return a @ b


def test_an_op_larger_than_the_host_room_stops_before_it_runs() -> None:
    with pytest.raises(HostMemoryError) as e, simulate("H100", host_memory_limit="64MiB") as r:
        _outer(100_000)  # 37.25 GiB: fits an H100, not the host
    text = str(e.value)
    assert "aten.mm would take 37.25 GiB of host memory" in text
    assert "the limit is 64.0 MiB" in text and "--values auto" in text
    assert r.error is not None and r.error["type"] == "HostMemoryError"
    assert r.error["file"] == __file__ and r.oom is None


@pytest.mark.parametrize("values", ["real", "auto"])
def test_an_op_larger_than_the_gpu_raises_cudas_error_at_the_users_line(values: str) -> None:
    with pytest.raises(torch.OutOfMemoryError) as e, simulate("T4", values=values) as r:
        _outer(200_000)  # 149 GiB: no T4 (and not this host) holds it
    assert str(e.value).startswith("CUDA out of memory. Tried to allocate 149.01 GiB")
    assert r.oom is not None and r.oom["file"] == __file__
    assert r.oom["line"] == _outer.__code__.co_firstlineno + 5  # the a @ b line
    assert r.values == "real"  # the GPU's error came first: nothing switched


def test_auto_goes_on_with_placeholders_from_the_line_that_would_not_fit() -> None:
    with simulate("H100", values="auto", host_memory_limit="64MiB") as r:
        small = torch.ones(1000, device="cuda")
        assert small.sum().item() == 1000.0  # real values so far
        c = _outer(100_000)
        assert c.shape == (100_000, 100_000) and c.device == torch.device("cuda", 0)
        assert (c * 2).sum().item() == 0.0  # placeholder values from there on
        assert small.sum().item() == 0.0  # also of tensors made before
        assert torch.cuda.max_memory_allocated() >= 2 * 100_000**2 * 4  # c and c * 2
    assert r.error is None and r.values == "placeholder"
    decision = r.values_decision
    assert decision is not None and decision["requested"] == "auto"
    assert decision["placeholder_from"] == {
        "file": __file__,
        "line": _outer.__code__.co_firstlineno + 5,
    }
    assert "aten.mm would take 37.25 GiB" in decision["reason"]
    assert r.notes[0]["text"].startswith("values: placeholder from ")


@pytest.mark.parametrize("limit", ["256KiB", "1MiB", "2MiB"])
def test_a_switch_mid_training_keeps_every_figure_of_a_real_run(limit: str) -> None:
    """The transformer of test_sim_values trained three steps, switched to placeholders at
    different points (model, forward, backward or optimizer): the memory, transfers, syncs
    and time estimate are those of the run with real values throughout."""
    with simulate("H100", values="real") as real:
        _train("transformer", "cuda")
    with simulate("H100", values="auto", host_memory_limit=limit) as auto:
        losses, _ = _train("transformer", "cuda")
    assert auto.error is None and auto.values == "placeholder", auto.values_decision
    assert auto.values_decision and auto.values_decision["placeholder_from"]["line"]
    assert losses[-1] == 0.0
    assert auto.transfers == real.transfers and auto.syncs == real.syncs
    for a, b in zip(auto.devices, real.devices, strict=True):
        assert (a.peak_allocated_bytes, a.peak_reserved_bytes) == (
            b.peak_allocated_bytes,
            b.peak_reserved_bytes,
        )
        assert a.peak_breakdown == b.peak_breakdown
        assert a.estimated_total_seconds == pytest.approx(b.estimated_total_seconds)


def test_auto_where_real_values_fit_runs_real_and_says_why() -> None:
    with simulate("H100", values="auto") as r:
        losses, _ = _train("cnn", "cuda")
    assert r.values == "real" and losses[-1] != 0.0
    assert r.values_decision is not None and r.values_decision["ran"] == "real"
    assert r.values_decision["reason"].startswith("real values fit in host memory: at most ")


def test_the_cpus_cast_copies_count_before_the_op() -> None:
    """sum and division of an int8 tensor compute in int64 / float32 on the CPU, which
    first copies the whole input to that dtype (module docstring of _hostmem); a copy to
    float32 casts element by element."""
    with simulate("H100", host_memory_limit="200MiB"):
        x = torch.ones(32 * MiB, dtype=torch.int8, device="cuda")
        y = x.float()  # 128 MiB: fits in the 168 MiB left
        del y
        with pytest.raises(HostMemoryError, match=r"aten\.sum would take 256\.0 MiB"):
            x.sum()  # an int64 copy of x, 8 bytes an element
        with pytest.raises(HostMemoryError, match=r"aten\.div would take 256\.0 MiB"):
            x / 3  # a float32 result and a float32 copy of x


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_with_a_wider_dtype_is_measured_not_refused(dtype: torch.dtype) -> None:
    """float8 promotes with no other dtype (c10's promoteTypes raises), yet CUDA runs a cast
    between them (ones_like(x, dtype=float64), x.to(float32)): the host check counts the
    wider copy instead of raising the promotion error."""
    with simulate("H100", values="real"):
        x = torch.ones(5, dtype=dtype, device="cuda")
        assert torch.ones_like(x, dtype=torch.float64).dtype == torch.float64
        assert torch.randn_like(x, dtype=torch.float16).dtype == torch.float16
        assert x.to(torch.float32).sum().item() == 5.0


def test_the_room_follows_the_memory_available_during_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    available = [64 * GiB]
    monkeypatch.setattr(_hostmem, "host_memory", lambda: (available[0], 128 * GiB))
    with simulate("H100", values="real", host_memory_limit="32GiB") as r:
        model = nn.Linear(1024, 1024).cuda()
        opt = torch.optim.SGD(model.parameters())
        model(torch.ones(8, 1024, device="cuda")).sum().backward()
        opt.step()  # the room is looked at again after each step
        available[0] = 6 * GiB + 512 * MiB  # another process took the rest: 6.4 GiB floor
        opt.step()
        with pytest.raises(HostMemoryError, match=r"the machine has 6\.50 GiB available now"):
            torch.empty(GiB, device="cuda")  # 1 GiB: within the limit, not the machine
    assert r.error is None  # (caught by the script)


@pytest.mark.parametrize(
    ("op", "kind"),
    [
        (torch.ops.aten.add.Tensor, _hostmem.POINTWISE),
        (torch.ops.aten.add_.Tensor, _hostmem.INPLACE),
        (torch.ops.aten._foreach_mul.Scalar, _hostmem.FOREACH),
        (torch.ops.aten.mm.default, _hostmem.EXACT),
        (torch.ops.aten.resize_.default, _hostmem.EXACT),
        (torch.ops.aten.embedding.default, _hostmem.EXACT),
    ],
)
def test_bounds_are_never_below_the_meta_functions_figure(op: object, kind: int) -> None:
    a, b = torch.ones(300, 1), torch.ones(1, 300)  # broadcast: a 300 × 300 result
    cases = {
        _hostmem.POINTWISE: [((a, b), {}), ((a, a), {})],
        _hostmem.INPLACE: [((torch.ones(300, 300), b), {})],
        _hostmem.FOREACH: [(([a, b], 2.0), {})],
        _hostmem.EXACT: [((a, b), {})]
        if op is torch.ops.aten.mm.default
        else [((torch.ones(3), [1000, 1000]), {})]
        if op is torch.ops.aten.resize_.default
        else [((torch.ones(10, 4), torch.zeros(500, 500, dtype=torch.long)), {})],
    }
    assert _hostmem.bound_kind(op) == kind
    for args, kwargs in cases[kind]:
        leaves = [t for x in args for t in (x if isinstance(x, list) else [x])]
        leaves = [t for t in leaves if isinstance(t, torch.Tensor)]
        exact = _hostmem.need(_hostmem.EXACT, op, args, kwargs, leaves)
        assert _hostmem.need(kind, op, args, kwargs, leaves) >= exact
    if kind == _hostmem.EXACT:
        assert (
            exact
            >= {
                torch.ops.aten.mm.default: 300 * 300 * 4,
                torch.ops.aten.resize_.default: 1000 * 1000 * 4 - 12,
                torch.ops.aten.embedding.default: 500 * 500 * 4 * 4,
            }[op]
        )


def test_placeholders_after_a_switch_take_no_host_memory() -> None:
    big = _hostmem.hollow((100_000, 100_000), (100_000, 1), torch.float32)  # 37 GiB
    assert big.shape == (100_000, 100_000) and big.is_contiguous() and big.is_cpu
    assert big.view(-1)[:3].tolist() == [0.0, 0.0, 0.0]


def test_a_signature_tells_apart_what_changes_the_outputs_size() -> None:
    """1, 1.0 and True are equal in Python and make int64, float32 and bool tensors."""
    full = torch.ops.aten.full.default
    sizes = {_hostmem.need(_hostmem.EXACT, full, ([1000], fill), {}, []) for fill in (1, 1.0, True)}
    assert sizes >= {8000, 4000, 1000}
    as_kwarg = {
        _hostmem.need(_hostmem.EXACT, full, ([1000],), {"fill_value": fill}, [])
        for fill in (1, 1.0)
    }
    assert as_kwarg >= {8000, 4000}


def test_a_foreach_operator_whose_first_argument_is_a_scalar() -> None:
    """``torch._foreach_pow(beta, steps)`` (Adam's capturable path): the host-memory bound
    of a ``_foreach_`` operator reads a list only where there is one."""
    with simulate("H100", values="real"):
        steps = [torch.full((), 3.0, device="cuda") for _ in range(3)]
        powers = torch._foreach_pow(0.5, steps)
        assert [float(p) for p in powers] == [0.125] * 3
        model = torch.nn.Linear(4, 4).cuda()
        opt = torch.optim.Adam(model.parameters(), capturable=True, foreach=True)
        model(torch.ones(2, 4, device="cuda")).sum().backward()
        opt.step()
