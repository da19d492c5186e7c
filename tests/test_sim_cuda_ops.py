"""CUDA's kernels and dtypes from generated data (tools/gen_cuda_ops.py), the CPU's missing
kernels computed in a wider dtype, the autograd nodes of moves, and torch's Python code that
reads the device."""

from __future__ import annotations

import gzip
import json
from importlib import resources

import pytest
import torch
import torch.nn.functional as F

from torchplace.sim import simulate
from torchplace.sim.rules import _cuda_ops

aten = torch.ops.aten


def _data() -> dict:
    version = _cuda_ops.table_version()
    assert version is not None
    raw = resources.files("torchplace").joinpath(
        "data", f"cuda-ops-{version[0]}.{version[1]}.json.gz"
    )
    return json.loads(gzip.decompress(raw.read_bytes()))


def test_the_table_is_the_installed_torchs_or_the_nearest() -> None:
    shipped = _cuda_ops.table_version()
    assert shipped is not None
    assert _cuda_ops.table_version("2.14.1") == (2, 14)
    assert _cuda_ops.table_version("2.13.0+cpu") == (2, 13)
    assert _cuda_ops.table_version("2.99.0") == max(
        _cuda_ops.table_version(f"2.{m}.0") or (0, 0) for m in (13, 14)
    )
    data = _data()
    assert data["generated_by"] == "tools/gen_cuda_ops.py"
    assert data["torch"].split(".")[:2] == [str(p) for p in shipped]


@pytest.mark.parametrize(
    ("dtypes", "shape", "expected"),
    [
        ((torch.float16, torch.int64), "", "float16,int64"),
        ((torch.int64, None, torch.float32), "empty", "int64|=float32|empty"),
        ((None, torch.bool), "scalar", "|=bool|scalar"),
    ],
)
def test_signatures_round_trip_through_text(dtypes: tuple, shape: str, expected: str) -> None:
    text = _cuda_ops.signature_text(dtypes, shape)
    assert text == expected
    assert _cuda_ops._parse_signature(text.split("|empty")[0].split("|scalar")[0]) == dtypes


def test_a_mode_name_is_part_of_the_signature() -> None:
    x, i = torch.ones(3), torch.zeros(3, dtype=torch.long)
    sig = _cuda_ops.signature([x, i, x], (x, 0, i, x, "amax"), {"note": "a free text"})
    assert sig == (torch.float32, torch.int64, torch.float32, None, "amax")
    text = _cuda_ops.signature_text(sig, "filled")
    assert text == "float32,int64,float32|='amax'|filled"
    assert _cuda_ops._parse_signature(text.removesuffix("|filled")) == sig


def test_shape_classes_follow_the_result() -> None:
    f8 = torch.float8_e4m3fn
    out, a, b = (
        torch.empty(5, 10, dtype=f8),
        torch.empty(5, 0, dtype=f8),
        torch.empty(0, 10, dtype=f8),
    )
    addmm = aten.addmm.default
    assert _cuda_ops.call_class([out, a, b], addmm, (out, a, b), {}) == "filled"
    assert _cuda_ops.call_class([out[:0], a[:0], b], addmm, (out[:0], a[:0], b), {}) == "empty"
    assert _cuda_ops.call_class([out[:0], a[:0], b], None, (), {}) == "empty"
    one = torch.ones(1, 4)  # no input empty, an empty result: pdist of one row
    assert _cuda_ops.call_class([one], aten._pdist_forward.default, (one, 2.0), {}) == "empty"
    assert _cuda_ops.call_class([one], None, (one, 2.0), {}) == ""


def test_signature_lists_tensor_then_dtype_arguments() -> None:
    x, y = torch.ones(2, dtype=torch.int32), torch.ones(0)
    sig = _cuda_ops.signature([x, y], (x, torch.float16), {"dtype": torch.bool})
    assert sig == (torch.int32, torch.float32, None, torch.float16, torch.bool)
    assert _cuda_ops.shape_class([x, y]) == "empty"
    assert _cuda_ops.shape_class([torch.tensor(1.0), x]) == "scalar"
    assert _cuda_ops.shape_class([x]) == ""


@pytest.mark.parametrize(
    ("make", "error", "text"),
    [
        # aten/src/ATen/native/cuda/Blas.cpp: AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2
        (lambda: torch.ones(2, 2, dtype=torch.long) @ torch.ones(2, 2, dtype=torch.long),
         NotImplementedError, "\"addmm_cuda\" not implemented for 'Long'"),
        (lambda: torch.ones(2, 2, 2, dtype=torch.int32).bmm(torch.ones(2, 2, 2, dtype=torch.int32)),
         NotImplementedError, "\"baddbmm_cuda\" not implemented for 'Int'"),
        (lambda: torch.ones(3, dtype=torch.long).dot(torch.ones(3, dtype=torch.long)),
         NotImplementedError, "\"dot\" not implemented for 'Long'"),
        (lambda: torch.nn.functional.linear(
            torch.ones(2, 3).to(torch.float8_e4m3fn), torch.ones(4, 3).to(torch.float8_e4m3fn),
            torch.ones(4).to(torch.float8_e4m3fn)),
         NotImplementedError, "\"addmm_cuda\" not implemented for 'Float8_e4m3fn'"),
        # SummaryOps.cu: histc on CUDA takes no Half
        (lambda: torch.histc(torch.ones(4, dtype=torch.float16)),
         RuntimeError, "HalfTensor is not supported"),
        # cudnn/Utils: the integer convolution goes to cuDNN, which has no Long
        (lambda: F.conv2d(torch.ones(1, 1, 3, 3, dtype=torch.long), torch.ones(1, 1, 2, 2, dtype=torch.long)),
         RuntimeError, "getCudnnDataTypeFromScalarType() not supported for Long"),
        # ... with a bias too (another signature: refused on every sample, by cuDNN or by the
        # depthwise or slow kernel Convolution.cpp's select_conv_backend picked), in another
        # dtype and rank
        (lambda: F.conv3d(torch.ones(1, 1, 3, 3, 3, dtype=torch.int16),
                          torch.ones(2, 1, 2, 2, 2, dtype=torch.int16), torch.ones(2, dtype=torch.int16)),
         RuntimeError, "getCudnnDataTypeFromScalarType() not supported for Short"),
        (lambda: F.conv_transpose1d(torch.ones(1, 2, 4, dtype=torch.bool),
                                    torch.ones(2, 1, 3, dtype=torch.bool), torch.ones(1, dtype=torch.bool)),
         RuntimeError, "getCudnnDataTypeFromScalarType() not supported for Bool"),
    ],
)  # fmt: skip
def test_cuda_refuses_what_its_kernels_lack(make, error, text) -> None:
    with simulate("H100"), torch.device("cuda"), pytest.raises(error) as caught:
        make()
    assert str(caught.value) == text


@pytest.mark.parametrize(
    ("dtype", "runs", "refuses"),
    [
        # what the 2.13 and 2.14 wheels' host code did with OpInfo's scatter_reduce samples
        # (tools/gen_cuda_ops.py): "sum" takes bool and complex; amax/amin/prod refuse bool,
        # mean and prod complex ("cuda_scatter_gather_base_kernel_func" not implemented)
        (torch.bool, ["sum"], ["amax", "amin", "prod"]),
        (torch.complex64, ["sum"], ["mean", "prod"]),
        (torch.int32, ["sum", "amax", "prod", "mean"], []),
    ],
)
def test_each_reduction_mode_has_its_own_dtypes(dtype, runs, refuses) -> None:
    with simulate("H100"), torch.device("cuda"):
        x, i = torch.ones(4, dtype=dtype), torch.tensor([0, 1, 0, 1])
        for mode in runs:
            assert x.scatter_reduce(0, i, x, mode).dtype == dtype
        for mode in refuses:
            with pytest.raises(NotImplementedError, match="scatter_gather_base_kernel_func"):
                x.scatter_reduce(0, i, x, mode)


def test_an_empty_product_of_a_dtype_cuda_lacks_is_refused_where_it_fills() -> None:
    """addmm with an empty inner dimension scales ``self`` (Blas.cpp), which float8 has no
    kernel for; with an empty result it returns first."""
    f8 = torch.float8_e4m3fn
    with simulate("H100"), torch.device("cuda"):
        self = torch.zeros(5, 10).to(f8)
        with pytest.raises(NotImplementedError, match="not implemented for 'Float8_e4m3fn'"):
            torch.addmm(self, torch.zeros(5, 0).to(f8), torch.zeros(0, 10).to(f8))
        empty = torch.addmm(self[:0], torch.zeros(0, 0).to(f8), torch.zeros(0, 10).to(f8))
        assert empty.shape == (0, 10) and empty.dtype == f8


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_an_empty_result_returns_before_the_dtype_switch(dtype: torch.dtype) -> None:
    """pdist of one row has no distance to compute: CUDA returns its empty result before
    the kernel's dtype switch (aten/src/ATen/native/Distance.cpp), which has no half types."""
    with simulate("H100"), torch.device("cuda"):
        assert F.pdist(torch.ones(1, 4, dtype=dtype)).shape == (0,)
        with pytest.raises(NotImplementedError, match='"pdist_cuda" not implemented for'):
            F.pdist(torch.ones(3, 4, dtype=dtype))


def test_an_operator_cuda_has_no_kernel_for_raises_the_dispatchers_error() -> None:
    with simulate("H100"):
        x = torch.rand(10, device="cuda")
        with pytest.raises(NotImplementedError) as caught:
            torch.histogram(x, bins=4)
    text = str(caught.value)
    assert text.startswith(
        "Could not run 'aten::histogram.bin_ct' with arguments from the 'CUDA' backend."
    )
    assert "'aten::histogram.bin_ct' is only available for these backends: [CPU," in text
    assert "\n\nCPU: registered at" in text


def test_what_cuda_runs_still_runs() -> None:
    with simulate("H100"), torch.device("cuda"):
        a = torch.ones(4, 4, dtype=torch.float16)
        assert (a @ a).dtype == torch.float16
        assert torch.histc(torch.arange(8.0), bins=4).tolist() == [2.0, 2.0, 2.0, 2.0]
        assert (torch.ones(3, dtype=torch.long) + 1).tolist() == [2, 2, 2]
        # an empty product returns before CUDA's dtype switch
        assert torch.ones(0, 2, dtype=torch.long).mm(torch.ones(2, 0, dtype=torch.long)).shape == (
            0,
            0,
        )


def test_integer_histc_computes_as_on_cuda() -> None:
    """Mixtral's router counts experts with histc on integers: CUDA's kernel takes them, the
    CPU's does not (torch.histc(int) raises "histogram_cpu" not implemented for 'Int')."""
    experts = torch.tensor([[0, 3], [1, 3], [3, 2], [0, 0]], dtype=torch.int32)
    with pytest.raises(NotImplementedError):
        torch.histc(experts, bins=4, min=0, max=3)
    with simulate("H100"):
        counts = torch.histc(experts.cuda(), bins=4, min=0, max=3)
        assert counts.device == torch.device("cuda", 0) and counts.dtype == torch.int32
        assert counts.cpu().tolist() == [3, 1, 1, 3]
        for dtype in (torch.uint8, torch.int64):
            assert torch.histc(experts.to("cuda", dtype), bins=4, min=0, max=3).dtype == dtype


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_avg_pool3d_computes_in_float(dtype: torch.dtype) -> None:
    x = torch.randn(1, 2, 4, 4, 4).to(dtype)
    want = F.avg_pool3d(x.float(), 2).to(dtype)  # CUDA accumulates in float
    with simulate("H100"):
        got = F.avg_pool3d(x.cuda(), 2)
        assert got.dtype == dtype and got.device.type == "cuda"
        torch.testing.assert_close(got.cpu(), want, atol=1e-2, rtol=1e-2)


def test_half_fft_and_complex_nansum_compute() -> None:
    x = torch.randn(16)
    with simulate("H100"):
        spectrum = torch.fft.rfft(x.to("cuda", torch.float16))
        assert spectrum.dtype == torch.complex32 and spectrum.shape == (9,)
        torch.testing.assert_close(
            spectrum.cpu().to(torch.complex64),
            torch.fft.rfft(x.half().float()),
            atol=0.05,
            rtol=0.01,
        )
        z = torch.tensor([1 + 2j, float("nan"), 3 - 1j], device="cuda")
        total = torch.nansum(z)
        assert total.dtype == torch.complex64 and total.item() == 4 + 1j


def test_widened_in_place_and_out_calls_write_their_arguments() -> None:
    x = torch.tensor([1, 2, 2, 7], dtype=torch.int32)
    out = torch.empty(3, dtype=torch.int32)
    got = _cuda_ops.run_wider(
        aten.histc.out, (x, 3), {"min": 0, "max": 7, "out": out}, RuntimeError()
    )
    assert got is out and out.tolist() == [3, 0, 1]
    y = torch.tensor([1.0, 4.0], dtype=torch.float16)
    same = _cuda_ops.run_wider(aten.sqrt_.default, (y,), {}, RuntimeError())
    assert same is y and y.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="kept"):  # no wider dtype has a CPU kernel
        _cuda_ops.run_wider(
            aten.histc.default, (torch.ones(2, dtype=torch.complex64),), {}, ValueError("kept")
        )


def test_scaled_mm_capability_rule_is_not_in_the_data() -> None:
    """_scaled_mm needs compute capability 8.9 (Blas.cpp): the data, made at 9.0, runs it;
    the hand-written rule (_device_rules.check_dtypes) refuses it on an A100 (8.0)."""
    rule = _cuda_ops.rule_for(aten._scaled_mm.default)
    fp8 = (torch.float8_e4m3fn, torch.float8_e4m3fn, torch.float32, torch.float32)
    assert rule is None or fp8 not in rule.refuse
    a = torch.ones(16, 16).to(torch.float8_e4m3fn)
    b = torch.ones(16, 16).to(torch.float8_e4m3fn).t()
    one = torch.ones(())
    with (
        simulate("A100 80GB"),
        pytest.raises(RuntimeError, match=r"compute capability >= 9\.0 or 8\.9"),
    ):
        torch._scaled_mm(a.cuda(), b.cuda(), one.cuda(), one.cuda())


# --- autograd sees CUDA's nodes --------------------------------------------------------


def _plain_node(move) -> str:
    """The node plain torch records for the same move to another device (meta) or dtype."""
    return type(move(torch.ones(3, requires_grad=True)).grad_fn).__name__


@pytest.mark.parametrize("values", ["real", "placeholder"])
@pytest.mark.parametrize(
    "move",
    [
        lambda x: x.to("cuda"),
        lambda x: x.cuda(),
        lambda x: x.to("cuda", torch.float16),
        lambda x: x.to(device="cuda", dtype=torch.float64, copy=True),
        lambda x: x.to("cuda", torch.float16, False, True),  # copy by position
        lambda x: x.to(torch.zeros(1, device="cuda")),
    ],
)  # fmt: skip
def test_a_leaf_moved_to_the_gpu_has_the_nodes_cuda_records(move, values: str) -> None:
    assert _plain_node(lambda x: x.to("meta")) == "ToCopyBackward0"
    x = torch.arange(3.0, requires_grad=True)
    with simulate("H100", values=values):
        y = move(x)
        assert y.device == torch.device("cuda", 0)
        assert type(y.grad_fn).__name__ == "ToCopyBackward0"
        assert type(y.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
        (y.float() * 2).sum().backward()
    assert x.grad is not None and x.grad.device.type == "cpu" and x.grad.dtype == x.dtype
    if values == "real":
        assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_gradients_come_back_across_moves_and_copies() -> None:
    with simulate("H100", gpus=2) as report:
        z = torch.ones(3, device="cuda", requires_grad=True)
        w = z.cpu()
        assert type(w.grad_fn).__name__ == "ToCopyBackward0"
        (w * 3).sum().backward()
        assert z.grad is not None and z.grad.device == torch.device("cuda", 0)
        assert z.grad.tolist() == [3.0, 3.0, 3.0]
        v = z.to("cuda:1")
        assert type(v.grad_fn).__name__ == "ToCopyBackward0"
        (v * 5).sum().backward()
        assert z.grad.device == torch.device("cuda", 0) and z.grad.tolist() == [8.0, 8.0, 8.0]
        x = torch.ones(3, requires_grad=True)
        c = torch.zeros(3, device="cuda")
        c.copy_(x)
        assert type(c.grad_fn).__name__ == "CopyBackwards"
        (c * 2).sum().backward()
        assert x.grad is not None and x.grad.device.type == "cpu" and x.grad.tolist() == [2.0] * 3
    assert report.transfers["d2h"]["count"] >= 2


# --- torch's Python code sees the GPU ----------------------------------------------------


def test_unravel_index_makes_its_divisors_on_the_gpu() -> None:
    with simulate("H100"):
        rows, cols = torch.unravel_index(torch.tensor([5, 7, 11], device="cuda"), (3, 4))
        assert rows.device.type == cols.device.type == "cuda"
        assert rows.tolist() == [1, 1, 2] and cols.tolist() == [1, 3, 3]


def test_device_checks_made_above_dispatch_raise_as_on_cuda() -> None:
    """Composite operators whose C++ checks devices before dispatch (meshgrid,
    cartesian_prod, tensor_split's index tensor) see the simulated devices."""
    with simulate("H100"):
        gpu, host = torch.ones(3, device="cuda"), torch.ones(2)
        with pytest.raises(
            RuntimeError, match=r"^meshgrid expects all tensors to have the same device$"
        ):
            torch.meshgrid(gpu, host, indexing="ij")
        with pytest.raises(
            RuntimeError, match=r"^meshgrid expects all tensors to have the same device$"
        ):
            torch.cartesian_prod(gpu, host)
        assert torch.meshgrid(gpu, gpu, indexing="ij")[1].device.type == "cuda"
        x = torch.arange(10.0, device="cuda")
        with pytest.raises(RuntimeError, match=r"to be on cpu, but it's on cuda:0$"):
            torch.tensor_split(x, torch.tensor([2, 5], device="cuda"))
        parts = torch.tensor_split(x, torch.tensor([2, 5]))  # a host index is what CUDA wants
        assert [p.shape[0] for p in parts] == [2, 3, 5] and parts[0].device.type == "cuda"


def test_a_list_whose_first_tensor_is_on_the_host_is_a_call_on_the_gpu() -> None:
    """A list argument's tensors are all looked at, not only its first: with a host tensor
    first, meshgrid's same-device check (above dispatch) still runs as on CUDA, and the
    operators checked at dispatch (cat, stack) raise CUDA's text."""
    with simulate("H100"):
        gpu, host = torch.ones(3, device="cuda"), torch.ones(2)
        for tensors in ([host, gpu], (host, gpu), [gpu, host]):
            with pytest.raises(RuntimeError, match=r"^meshgrid expects all tensors to have"):
                torch.meshgrid(tensors, indexing="xy")
        with pytest.raises(RuntimeError, match=r"^Expected all tensors to be on the same device"):
            torch.cat([host, gpu])
        with pytest.raises(RuntimeError, match=r"^Expected all tensors to be on the same device"):
            torch.stack((torch.ones(3), gpu))
        grid = torch.meshgrid([host, host], indexing="ij")  # all on the host: a host call
        assert grid[0].device.type == "cpu" and list(grid[0].shape) == [2, 2]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16])
def test_an_empty_integer_avg_pool_runs_as_on_cuda(dtype: torch.dtype) -> None:
    """CUDA's avg_pool2d counts its output (the 32-bit index check) before its dtype switch,
    which an empty output never reaches: an empty integer pool runs; a non-empty one raises
    CUDA's AT_DISPATCH text, not torch's meta function's or the CPU's."""
    with simulate("H100", values="real"):
        x = torch.zeros(0, 3, 6, dtype=dtype, device="cuda")
        assert F.avg_pool1d(x, 2).shape == (0, 3, 3)
        assert F.avg_pool2d(x.unsqueeze(-1), (2, 1)).shape == (0, 3, 3, 1)
        name = str(dtype).removeprefix("torch.")
        short = {"uint8": "Byte", "int16": "Short"}[name]
        with pytest.raises(RuntimeError, match=f"not implemented for '{short}'$") as info:
            F.avg_pool2d(torch.ones(1, 3, 6, 6, dtype=dtype, device="cuda"), 2)
        assert "cuda" in str(info.value)


def test_half_ffts_run_on_cudas_path() -> None:
    """The FFTs' C++ takes fp16 only on CUDA (SpectralOps.cpp promote_type_fft): the CPU
    build refuses it above dispatch, the simulation computes it in fp32."""
    x = torch.randn(8)
    with simulate("H100"):
        for fft in (torch.fft.fft, torch.fft.rfft, torch.fft.ihfft):
            out = fft(x.to("cuda", torch.float16))
            assert out.dtype == torch.complex32 and out.device.type == "cuda"


def test_a_binary_operator_with_a_number_runs_where_cuda_runs_it() -> None:
    """TensorIterator computes ``x / 2`` in x's dtype (a number or 0-dim tensor does not
    raise its category): complex32 arithmetic with numbers, and nanmean over it, run as
    on CUDA, while what CUDA itself refuses (complex32 ``mean``) still raises."""
    with simulate("H100"):
        x = torch.full((3,), 2 + 0j, device="cuda", dtype=torch.complex32)
        for out, want in (
            (torch.div(x, 2), 1 + 0j),
            (x * 3, 6 + 0j),
            (torch.add(x, 1), 3 + 0j),
            (x / torch.tensor(2.0), 1 + 0j),
            (torch.nanmean(x), 2 + 0j),
        ):
            assert out.dtype == torch.complex32 and out.is_cuda
            assert out.reshape(-1)[0].item() == want
        with pytest.raises(NotImplementedError, match="not implemented for 'ComplexHalf'"):
            x.mean()


# --- the backend CUDA's kernel picks (sim/_backends.py) ------------------------------------


def _meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize(
    ("args", "backend"),
    [
        # Normalization.cpp _select_batch_norm_backend: cuDNN for >= 3-d input with weight,
        # bias and running statistics (or none, training); fp16 needs fp32 weights; never bf16
        ((_meta(2, 3, 4), _meta(3), _meta(3), _meta(3), _meta(3), False, 1e-5), "cudnn"),
        ((_meta(2, 3, 4), _meta(3), _meta(3), None, None, True, 1e-5), "cudnn"),
        ((_meta(2, 3), _meta(3), _meta(3), _meta(3), _meta(3), True, 1e-5), "native"),
        ((_meta(2, 3, 4), None, _meta(3), _meta(3), _meta(3), True, 1e-5), "native"),
        ((_meta(2, 3, 4), _meta(3), _meta(3), None, None, False, 1e-5), "native"),
        ((_meta(2, 3, 4, dtype=torch.bfloat16), _meta(3), _meta(3), None, None, True, 1e-5),
         "native"),
        ((_meta(2, 3, 4, dtype=torch.float16), _meta(3, dtype=torch.float16), _meta(3), None,
          None, True, 1e-5), "native"),
        ((_meta(70000, 3, 4), _meta(3), _meta(3), _meta(3), _meta(3), False, 1e-5), "native"),
    ],
)  # fmt: skip
def test_batch_norm_picks_cudnn_as_aten_does(args: tuple, backend: str) -> None:
    from torchplace.sim.rules import _backends

    assert _backends.batch_norm_backend(*args) == backend
    with torch.backends.cudnn.flags(enabled=False):
        assert _backends.batch_norm_backend(*args) == "native"


@pytest.mark.parametrize(
    ("input", "weight", "stride", "dilation", "transposed", "output_padding", "groups", "backend"),
    [
        (_meta(1, 4, 8, 8), _meta(4, 1, 3, 3), [1, 1], [1, 1], False, [0, 0], 4, "CudaDepthwise2d"),
        (_meta(1, 4, 4, 4, 4), _meta(8, 1, 3, 3, 3), [1] * 3, [1] * 3, False, [0] * 3, 4,
         "CudaDepthwise3d"),
        (_meta(1, 4, 8, 8), _meta(4, 4, 3, 3), [1, 1], [2, 2], False, [0, 0], 1, "Cudnn"),
        (_meta(1, 4, 8), _meta(4, 2, 3), [2], [1], True, [1], 1, "CudnnTranspose"),
        # an output padding of at least the stride: is_output_padding_big
        (_meta(1, 4, 8, 8), _meta(4, 2, 3, 3), [1, 1], [1, 1], True, [1, 1], 1,
         "SlowTranspose2d"),
        (_meta(0, 4, 8, 8), _meta(4, 4, 3, 3), [1, 1], [1, 1], False, [0, 0], 1, "Empty"),
    ],
)  # fmt: skip
def test_convolution_picks_its_backend_as_aten_does(
    input, weight, stride, dilation, transposed, output_padding, groups, backend
) -> None:
    from torchplace.sim.rules import _backends

    padding = [0] * len(stride)
    args = (input, weight, None, stride, padding, dilation, transposed, output_padding, groups)
    assert _backends.conv_backend(args) == backend
    if backend.startswith("Cudnn"):
        with torch.backends.cudnn.flags(enabled=False):
            assert not _backends.conv_backend(args).startswith("Cudnn")


@pytest.mark.parametrize(
    ("make", "error", "text"),
    [
        # a depthwise 2-d convolution: the depthwise kernel's AT_DISPATCH, not cuDNN's
        (lambda: F.conv2d(torch.ones(1, 3, 5, 5, dtype=torch.int16),
                          torch.ones(3, 1, 2, 2, dtype=torch.int16), groups=3),
         NotImplementedError, "\"conv_depthwise2d_forward_cuda\" not implemented for 'Short'"),
        (lambda: F.conv2d(torch.ones(1, 3, 5, 5, dtype=torch.int16),
                          torch.ones(3, 3, 2, 2, dtype=torch.int16)),
         RuntimeError, "getCudnnDataTypeFromScalarType() not supported for Short"),
        # batch norm: cuDNN for a 3-d input with running statistics, the native kernel for a
        # 2-d one (cuda/Normalization.cu's batch_norm_stats)
        (lambda: F.batch_norm(torch.ones(2, 3, 4, dtype=torch.int64), torch.ones(3, dtype=torch.int64),
                              torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64),
                              torch.ones(3, dtype=torch.int64), training=True),
         RuntimeError, "getCudnnDataTypeFromScalarType() not supported for Long"),
        (lambda: F.batch_norm(torch.ones(2, 3, dtype=torch.int64), torch.ones(3, dtype=torch.int64),
                              torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64),
                              torch.ones(3, dtype=torch.int64), training=True),
         NotImplementedError, "\"batch_norm_stats_cuda\" not implemented for 'Long'"),
        (lambda: F.instance_norm(torch.ones(2, 3, 4, dtype=torch.int16),
                                 weight=torch.ones(3, dtype=torch.int16), bias=torch.ones(3, dtype=torch.int16)),
         RuntimeError, "getCudnnDataTypeFromScalarType() not supported for Short"),
        # factories: CUDA refuses the dtype unless the result is empty (or, linspace, one value)
        (lambda: torch.triu_indices(4, 4, dtype=torch.int8),
         NotImplementedError, "\"triu_indices_cuda\" not implemented for 'Char'"),
        (lambda: torch.linspace(0, 1, 3, dtype=torch.bool),
         NotImplementedError, "\"linspace_cuda\" not implemented for 'Bool'"),
    ],
)  # fmt: skip
def test_the_refusal_is_the_backends_cuda_picks(make, error, text) -> None:
    with simulate("H100"), torch.device("cuda"), pytest.raises(error) as caught:
        make()
    assert str(caught.value) == text


def test_without_cudnn_the_native_kernels_refuse() -> None:
    with simulate("H100"), torch.device("cuda"), torch.backends.cudnn.flags(enabled=False):
        x = torch.ones(1, 3, 5, 5, dtype=torch.int64)
        with pytest.raises(NotImplementedError, match='"slow_conv2d_cuda" not implemented'):
            F.conv2d(x, torch.ones(3, 3, 2, 2, dtype=torch.int64))
        w = torch.ones(3, dtype=torch.int64)
        with pytest.raises(NotImplementedError, match="batch_norm_stats_cuda"):
            F.batch_norm(x, w, w, w.clone(), w.clone(), training=True)


def test_empty_and_one_value_factories_run_as_on_cuda() -> None:
    with simulate("H100"), torch.device("cuda"):
        empty = torch.triu_indices(0, 3, dtype=torch.bfloat16)
        assert (empty.shape, empty.dtype, empty.device.type) == ((2, 0), torch.bfloat16, "cuda")
        assert torch.linspace(0, 1, 1, dtype=torch.bool).tolist() == [False]
        assert torch.tril_indices(3, 3).shape == (2, 6)  # int64: CUDA's kernel takes it


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_norm_statistics_are_fp32_as_cudas(dtype: torch.dtype) -> None:
    x = torch.randn(4, 3, 5)
    with simulate("H100"), torch.device("cuda"):
        out, mean, rstd = torch.native_layer_norm(x.to("cuda", dtype), [5], None, None, 1e-5)
        assert (out.dtype, mean.dtype, rstd.dtype) == (dtype, torch.float32, torch.float32)
        wide = x.to(dtype).float()
        torch.testing.assert_close(mean.cpu().flatten(), wide.mean(-1).flatten())
        running_mean, running_var = torch.zeros(3, dtype=dtype), torch.ones(3, dtype=dtype)
        _, save_mean, save_invstd, _ = aten._batch_norm_with_update(
            x.to("cuda", dtype), None, None, running_mean, running_var, 0.5, 1e-5
        )
        assert (save_mean.dtype, save_invstd.dtype, running_mean.dtype) == (
            torch.float32,
            torch.float32,
            dtype,
        )
        torch.testing.assert_close(save_mean.cpu(), wide.mean((0, 2)))
        assert running_mean.abs().sum().item() > 0  # written through, as CUDA's kernel does
        # evaluation: CUDA returns one statistic per channel (the CPU none)
        _, m, v = torch.native_batch_norm(
            x.to("cuda"), None, None, torch.zeros(3), torch.ones(3), False, 0.1, 1e-5
        )
        assert m.shape == v.shape == (3,)


def test_cuda_only_attention_kernels_called_directly_compute() -> None:
    """aten._flash_attention_forward and _efficient_attention_forward take (batch, seq,
    heads, dim) tensors and have no CPU kernel; their causal masks with more keys than
    queries are aligned bottom-right (FlashAttention-2) or as custom_mask_type says."""
    q, k = torch.randn(2, 5, 3, 8), torch.randn(2, 7, 3, 8)
    bottom_right = torch.ones(5, 7, dtype=torch.bool).tril(2)
    want = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), attn_mask=bottom_right
    ).transpose(1, 2)
    with simulate("H100"):
        qc, kc = q.to("cuda", torch.bfloat16), k.to("cuda", torch.bfloat16)
        out, lse, *_ = aten._flash_attention_forward(qc, kc, kc, None, None, 5, 7, 0.0, True, False)
        assert (out.shape, out.dtype, lse.shape, lse.dtype) == (
            (2, 5, 3, 8),
            torch.bfloat16,
            (2, 3, 5),
            torch.float32,
        )
        torch.testing.assert_close(out.float().cpu(), want, atol=0.05, rtol=0.05)
        with pytest.raises(RuntimeError, match="FlashAttention only support fp16 and bf16"):
            aten._flash_attention_forward(
                q.cuda(), k.cuda(), k.cuda(), None, None, 5, 7, 0.0, True, False
            )
        out, lse, seed, *_ = aten._efficient_attention_forward(
            q.cuda(), k.cuda(), k.cuda(), None, None, None, None, None, 0.0, 2, True
        )
        torch.testing.assert_close(out.cpu(), want, atol=1e-5, rtol=1e-5)
        # the seed on the host as 2.13's kernel makes it; 2.14's on the device without dropout
        home = "cpu" if torch.__version__ < "2.14" else "cuda"
        assert lse.shape == (2, 3, 32) and seed.device.type == home
        seed = aten._efficient_attention_forward(
            q.cuda(), k.cuda(), k.cuda(), None, None, None, None, None, 0.5, 1, False
        )[2]
        assert seed.device.type == "cpu"  # with dropout: the host's, in both
        with pytest.raises(NotImplementedError, match=r"does not simulate aten\._efficient"):
            cu = torch.tensor([0, 5], dtype=torch.int32, device="cuda")
            aten._efficient_attention_forward(
                q[0].cuda(), k[0].cuda(), k[0].cuda(), None, cu, cu, 5, 5, 0.0, 0, False
            )
