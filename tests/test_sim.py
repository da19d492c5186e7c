"""The simulator in-process: torch.cuda answers, device rules, memory, placeholders."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchplace.sim import simulate

MiB = 1024**2
GiB = 1024**3


def test_cuda_api_answers_as_the_simulated_gpu() -> None:
    before = torch.cuda.is_available()  # True on a machine with a GPU
    with simulate("T4", gpus=2) as report:
        assert torch.cuda.is_available()
        assert torch.cuda.device_count() == 2
        assert torch.cuda.get_device_name(1) == "Tesla T4"
        props = torch.cuda.get_device_properties(0)
        assert (props.major, props.minor, props.multi_processor_count) == (7, 5, 40)
        # torch 2.13 emulates bf16 before sm80: supported, but not natively
        assert torch.cuda.is_bf16_supported()
        assert not torch.cuda.is_bf16_supported(including_emulation=False)
        free, total = torch.cuda.mem_get_info()
        assert total == props.total_memory and 0 < free < total
        torch.cuda.set_device(1)
        assert torch.cuda.current_device() == 1
        x = torch.empty(10, device="cuda")
        assert x.device == torch.device("cuda", 1)
    assert len(report.devices) == 2
    assert torch.cuda.is_available() == before  # restored afterwards


def test_tensors_report_cuda_and_hold_no_host_memory() -> None:
    with simulate("H100", values="placeholder"):
        big = torch.empty(16 * GiB // 4, device="cuda")  # 16 GiB: never on the host
        assert big.device == torch.device("cuda", 0)
        assert big.is_cuda and big.get_device() == 0 and not big.is_meta
        for t in (torch.zeros(3).cuda(), torch.ones(3).to("cuda:0"), torch.ones(3).to(0)):
            assert t.device.type == "cuda"
        with torch.device("cuda"):
            lin = nn.Linear(4, 4)
        assert next(lin.parameters()).device == torch.device("cuda", 0)
        back = big[:4].cpu()
        assert back.device.type == "cpu" and back.tolist() == [0.0] * 4
        assert torch.cuda.memory_allocated() >= 16 * GiB


def test_memory_allocated_counts_storages_once_rounded_to_512() -> None:
    with simulate("H100"):
        base = torch.cuda.memory_allocated()
        a = torch.empty(1000, device="cuda")  # 4000 B -> 4096
        assert torch.cuda.memory_allocated() - base == 4096
        view = a[10:20].view(2, 5)  # a view: no new storage
        assert torch.cuda.memory_allocated() - base == 4096
        b = torch.empty(1, device="cuda")
        assert torch.cuda.memory_allocated() - base == 4096 + 512
        del a, view, b
        assert torch.cuda.memory_allocated() == base
        assert torch.cuda.max_memory_allocated() >= base + 4608


def test_module_to_cuda_keeps_parameter_identity_and_trains() -> None:
    with simulate("A100") as report:
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
        opt = torch.optim.AdamW(model.parameters())  # made before .to(): must still work
        weight = model[0].weight
        model.to("cuda")
        assert model[0].weight is weight and weight.is_cuda
        for _ in range(2):
            x, y = torch.randn(32, 256).cuda(), torch.randint(0, 10, (32,)).cuda()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert weight.grad is not None and weight.grad.is_cuda
        assert opt.state[weight]["exp_avg"].is_cuda
    params = sum(p.numel() * 4 for p in model.parameters())
    d = report.device(0)
    assert d.peak_breakdown["parameters"] == pytest.approx(params, rel=0.01)
    assert d.peak_breakdown["optimizer_state"] >= 2 * params
    assert d.steps == 2 and d.estimated_step_seconds is not None and d.estimated_step_seconds > 0
    assert report.transfers["h2d"]["count"] >= 4


def test_mixing_devices_raises_pytorch_error_and_allows_cpu_scalars() -> None:
    with simulate("H100", gpus=2) as report:
        x = torch.ones(3, device="cuda")
        assert (x * torch.tensor(2.0)).is_cuda  # 0-dim CPU tensors are allowed, as on CUDA
        # TensorIterator ops (aten/src/ATen/TensorIterator.cpp compute_types)
        with pytest.raises(
            RuntimeError,
            match=r"^Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!$",
        ):
            x + torch.ones(3)
        with pytest.raises(RuntimeError, match="found at least two devices, cuda:0 and cuda:1!"):
            x + torch.ones(3, device="cuda:1")
        # generated wrappers (aten/src/ATen/core/op_registration/adaption.cpp)
        lin = nn.Linear(3, 3).cuda()
        with pytest.raises(
            RuntimeError,
            match=r"^Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on cuda:0 \(when checking argument in method wrapper_CUDA_addmm\)$",
        ):
            lin(torch.ones(2, 3))
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.ones(1, device="cuda:2")
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.cuda.set_device(5)
    assert report.error is None  # caught by the block, not an error of the run


def test_out_of_memory_raises_cuda_error_and_is_reported() -> None:
    with simulate("T4", values="placeholder") as report:
        keep = torch.empty(8 * GiB // 4, device="cuda")
        with pytest.raises(torch.OutOfMemoryError) as info:
            torch.empty(8 * GiB // 4, device="cuda")
        assert keep.is_cuda
    message = str(info.value)
    assert message.startswith("CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total")
    assert "of which" in message and "is free" in message
    assert report.oom is not None
    assert report.oom["device"] == 0 and report.oom["requested_bytes"] >= 8 * GiB
    assert report.oom["file"] == __file__
    assert report.device(0).verdict.startswith("out of memory at")


def test_memory_override_changes_capacity() -> None:
    with simulate("H100", memory="24GB") as report:
        assert torch.cuda.get_device_properties(0).total_memory == 24 * 10**9
    assert report.device(0).capacity_bytes == 24 * 10**9


def test_real_values_are_exact_and_reads_count_as_syncs() -> None:
    with simulate("H100") as report:
        loss = torch.arange(4.0, device="cuda").sum()
        assert loss.item() == 6.0 and bool(loss > 1)
        assert f"{loss:.2f}" == "6.00"
        assert repr(loss) == "tensor(6., device='cuda:0')"
        x = torch.tensor([[1.0, -2.0], [3.0, -4.0]], device="cuda", requires_grad=True)
        assert repr(x * 2) == (
            "tensor([[ 2., -4.],\n        [ 6., -8.]], device='cuda:0', grad_fn=<MulBackward0>)"
        )
        assert x[x > 0].tolist() == [1.0, 3.0]  # a boolean mask: exact, and a sync
        assert x.detach().cpu().numpy().tolist() == [[1.0, -2.0], [3.0, -4.0]]
    kinds = {s["kind"] for s in report.syncs}
    assert {"item", "bool", "print", "to cpu", "nonzero (boolean mask)"} <= kinds
    assert all(s["file"] == __file__ for s in report.syncs)


def test_placeholder_values_read_as_zeros_and_count_as_syncs() -> None:
    with simulate("H100", values="placeholder") as report:
        loss = torch.ones(4, device="cuda").sum()
        assert loss.item() == 0.0
        assert not bool(loss > 1)
        assert f"{loss:.2f}" == "0.00"
        assert "device='cuda:0'" in repr(loss)
        with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
            loss.numpy()
        assert loss.cpu().numpy().tolist() == 0.0
    kinds = {s["kind"] for s in report.syncs}
    assert {"item", "bool", "print", "to cpu"} <= kinds
    assert all(s["file"] == __file__ for s in report.syncs)
    assert report.transfers["d2h"]["count"] >= 4


def test_autocast_uses_cuda_op_lists() -> None:
    with simulate("H100"):
        lin = nn.Linear(8, 8).cuda()
        norm = nn.LayerNorm(8).cuda()
        x = torch.randn(4, 8).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = lin(x)
            n = norm(h)
            assert h.dtype == torch.bfloat16  # linear runs in lower precision
            assert n.dtype == torch.float32  # layer_norm is on the fp32 list
            n.float().sum().backward()
        assert lin.weight.grad is not None and lin.weight.grad.dtype == torch.float32


def test_attention_embedding_conv_and_norm_layers() -> None:
    with simulate("H100") as report:
        emb = nn.Embedding(100, 64).cuda()
        mha = nn.MultiheadAttention(64, 4, batch_first=True).cuda()
        conv = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.GroupNorm(2, 8)).cuda()
        tokens = torch.randint(0, 100, (2, 16)).cuda()
        h = emb(tokens)
        out, _ = mha(h, h, h)
        q = torch.randn(2, 4, 16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        att = nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        (out.sum() + att.float().sum() + conv(torch.randn(2, 3, 8, 8).cuda()).sum()).backward()
        assert q.grad is not None and q.grad.is_cuda and emb.weight.grad is not None
    assert any("cuDNN kernel (as on the GPU)" in n["text"] for n in report.notes)


def test_data_dependent_shapes_are_reported() -> None:
    with simulate("H100", values="placeholder") as report:
        x = torch.randn(10, device="cuda")
        picked = x[x > 0]
        assert picked.is_cuda and picked.dim() == 1
    assert any("depends on data" in n["text"] for n in report.notes)


def test_meta_built_model_materialises_on_the_gpu_without_host_memory() -> None:
    with simulate("H100", values="placeholder"):
        with torch.device("meta"):
            big = nn.Linear(32768, 32768)  # 4 GiB of weights
        assert big.weight.is_meta
        big.to_empty(device="cuda")
        assert big.weight.is_cuda
        assert torch.cuda.memory_allocated() >= 4 * GiB
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            nn.Linear(2, 2, device="meta").to("cuda")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="gpus must be"), simulate(gpus=0):
        pass
    with pytest.raises(ValueError), simulate("H1OO0"):
        pass
    with pytest.raises(ValueError), simulate(memory="lots"):
        pass
    with simulate(), pytest.raises(RuntimeError, match="do not nest"), simulate():
        pass


def test_error_inside_the_block_is_recorded_and_reraised() -> None:
    with pytest.raises(RuntimeError), simulate() as report:
        torch.ones(2, device="cuda") + torch.ones(2)
    assert report.error is not None
    assert report.error["type"] == "RuntimeError" and report.error["file"] == __file__


def test_dropout_keeps_a_bool_mask_as_cuda_does() -> None:
    with simulate("H100"):
        x = torch.randn(1024, 1024, device="cuda", requires_grad=True)
        base = torch.cuda.memory_allocated()
        y = nn.functional.dropout(x, 0.1, training=True)
        # output (4 MiB) + a bool mask (1 MiB), not a float mask (4 MiB)
        assert torch.cuda.memory_allocated() - base == 5 * MiB
        y.sum().backward()


class _Twice(torch.autograd.Function):
    """A custom autograd Function: its backward is the user's code, run by the engine."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x * 2  # TWICE_FORWARD

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        return grad.clone() * 2  # TWICE_BACKWARD


def _allocation_lines() -> list[tuple[str, int] | None]:
    """The user's line each allocation of a small training step is attributed to."""
    with simulate("H100", values="real") as report:
        w = torch.ones(32, 32).to("cuda").requires_grad_()  # MOVE
        w.detach().cpu().cuda()  # MOVE_BACK
        y = _Twice.apply(w @ w)  # MATMUL
        y.sum().backward()  # BACKWARD
        torch._foreach_sqrt([torch.ones(8, device="cuda") for _ in range(3)])  # SQRT
    assert report.state is not None
    trace = report.state.trace
    frames = [trace.frames[i][:2] if i >= 0 else None for i in trace.frame]
    return [f if f is not None and f[0] == __file__ else None for f in frames]


TAGS = ("TWICE_FORWARD", "TWICE_BACKWARD", "MOVE", "MOVE_BACK", "MATMUL", "BACKWARD", "SQRT")


def test_each_allocation_names_the_users_line_that_made_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import inspect

    from torchplace.sim.accounting import _state

    lines = {
        tag: n
        for n, text in enumerate(inspect.getsource(inspect.getmodule(_Twice)).splitlines(), 1)
        for tag in TAGS
        if text.rstrip().endswith(f"# {tag}")
    }
    shared = _allocation_lines()
    counts = {tag: shared.count((__file__, line)) for tag, line in lines.items()}
    assert counts == {
        "TWICE_FORWARD": 1, "TWICE_BACKWARD": 2, "MOVE": 1, "MOVE_BACK": 1, "MATMUL": 1,
        "BACKWARD": counts["BACKWARD"], "SQRT": 6,  # three ones, three roots
    }  # fmt: skip
    assert counts["BACKWARD"] >= 2  # the engine's own allocations: the backward call's line
    # The allocations of one torch function call share one stack walk; a walk for each
    # allocation finds the same lines.
    monkeypatch.setattr(_state.CallSite, "user_code_frame", lambda self: _state._user_code_frame())
    assert _allocation_lines() == shared


def test_storage_key_is_the_storage_address_without_a_storage_object() -> None:
    """The simulator keys storages with torch._C._storage_id (no Python storage object, no
    torch function): it must stay the same number as ``untyped_storage()._cdata``, and a
    tensor without storage must raise the same error, in every torch this runs on."""
    from torchplace.sim.accounting._state import storage_key

    t = torch.randn(4, 4)
    for x in (t, t[1:], t.t(), nn.Parameter(torch.ones(3)), torch.empty(2, device="meta")):
        assert storage_key(x) == x.untyped_storage()._cdata
    assert storage_key(t[1:]) == storage_key(t)
    sparse = torch.eye(2).to_sparse()
    with pytest.raises(NotImplementedError):
        storage_key(sparse)
    with pytest.raises(NotImplementedError):
        sparse.untyped_storage()


def test_host_item_skips_the_simulator_but_not_a_users_dispatch_mode() -> None:
    """A host scalar's .item() (AdamW reads one per parameter per step) does not enter the
    simulator's dispatch mode; a dispatch mode of the user's own still sees its op."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with simulate("H100") as report:
        step = torch.tensor(3.0)
        assert step.item() == 3.0 and int(step) == 3 and float(step) == 3.0
        with Seen() as seen:
            assert step.item() == 3.0
        assert seen.ops == ["aten._local_scalar_dense.default"]
        x = torch.ones(2, device="cuda").sum()
        assert x.item() == 2.0
    # the simulated tensor's read syncs; the host's do not
    assert [(s["kind"], s["count"]) for s in report.syncs] == [("item", 1)]


@pytest.mark.parametrize("values", ["real", "placeholder"])
def test_an_explicit_host_device_wins_over_the_source_tensors(values: str) -> None:
    """``zeros_like(x, device="cpu")`` and ``x.new_zeros(n, device="cpu")`` read only x's
    shape and dtype: the result is on the host, as on a GPU (torch/_torch_docs.py:
    "device ... Default: if None, defaults to the device of input")."""
    with simulate("H100", gpus=2, values=values) as report:
        x = torch.ones(2, 3, device="cuda:1", dtype=torch.float16)
        made = [
            torch.zeros_like(x, device="cpu"),
            torch.empty_like(x, device=torch.device("cpu")),
            torch.full_like(x, 7, device="cpu"),
            torch.rand_like(x, device="cpu", dtype=torch.float32),
            torch.randint_like(x, 5, device="cpu"),
            x.new_ones((4,), device="cpu"),
            x.new_empty((4,), device="cpu"),
            x.new_full((2,), 1.5, device="cpu"),
        ]
        for t in made:
            assert t.device == torch.device("cpu") and not t.is_meta
        assert float(made[2][0, 0]) == 7.0 and float(made[5].sum()) == 4.0
        # without device=, and with another GPU, the rule is unchanged
        assert torch.zeros_like(x).device == torch.device("cuda", 1)
        assert torch.zeros_like(x, device="cuda:0").device == torch.device("cuda", 0)
        assert x.new_zeros(3).device == torch.device("cuda", 1)
        c = torch.ones(3)
        assert torch.ones_like(c, device="cuda").device == torch.device("cuda", 0)
    assert report.transfers["d2h"]["count"] == 0  # nothing was copied


@pytest.mark.parametrize("values", ["real", "placeholder"])
def test_legacy_constructors_follow_the_source_or_the_current_device(values: str) -> None:
    """``x.new(...)`` takes x's dtype and device, or ``device=`` of x's device type
    (tensor_new.cpp legacy_tensor_new); ``torch.cuda.FloatTensor(n, device=None)`` is on the
    current device (PyTorch's test_cuda_multigpu test_new and test_tensor_device)."""
    with simulate("H100", gpus=2, values=values):
        x = torch.randn(3, 3, dtype=torch.float16).cuda()
        with torch.cuda.device(1):
            made = [x.new([0, 1, 2]), x.new(2, 3), x.new(torch.Size([4])), x.new()]
            assert [t.get_device() for t in made] == [0, 0, 0, 0]
            assert [tuple(t.shape) for t in made] == [(3,), (2, 3), (4,), (0,)]
            assert {t.dtype for t in made} == {torch.float16}
            assert x.new([0, 1, 2], device=1).get_device() == 1
            assert torch.cuda.FloatTensor(1, device=None).get_device() == 1
            assert torch.cuda.FloatTensor(1, device=0).get_device() == 0
        with pytest.raises(RuntimeError, match="legacy constructor expects device type: cuda"):
            x.new([1], device="cpu")
        assert torch.ones(2).new([1, 2]).device == torch.device("cpu")
        if values == "real":
            assert made[0].tolist() == [0.0, 1.0, 2.0]
