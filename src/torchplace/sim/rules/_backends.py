"""Which backend CUDA's batch norm and convolution kernels pick, and what that changes.

Some CUDA kernels choose a backend from their arguments before anything else: cuDNN or
torch's own kernel for batch norm, cuDNN, a depthwise or a "slow" (im2col) kernel for a
convolution. Each backend refuses the dtypes it lacks with its own exception type and text
(cuDNN's ``RuntimeError: getCudnnDataTypeFromScalarType() not supported for Long``, the
native kernels' ``AT_DISPATCH`` ``NotImplementedError``), so the error CUDA raises for the
same signature depends on the shapes, ``groups``, ``dilation``, ``training`` and
``torch.backends.cudnn.enabled``, which the generated table (:mod:`torchplace.sim.rules._cuda_ops`)
does not key. This module ports the choice:

- :func:`batch_norm_backend`: ``_select_batch_norm_backend``
  (aten/src/ATen/native/Normalization.cpp), which ``_batch_norm_impl_index`` (the
  ``batch_norm`` and ``instance_norm`` composites) and ``_batch_norm_with_update``'s CUDA
  kernel (aten/src/ATen/native/cuda/Normalization.cu) call;
- :func:`conv_backend`: ``select_conv_backend`` (aten/src/ATen/native/Convolution.cpp):
  ATen's own choice (``torch._C._select_conv_backend``) on fake CUDA tensors, with
  ``ConvParams::use_cudnn``'s checks ported for a build that, like the CPU build, was not
  compiled with cuDNN (where ATen never picks it);

and :func:`refusal` raises the refusal of the backend picked: the table's refusal of the
operator that backend runs (``cudnn_batch_norm``, ``native_batch_norm``), or, for a
convolution, the one of the texts CUDA refused its signature with that names the backend.

It also gives norm kernels' statistics the dtype and shape CUDA's kernels give them
(:func:`accumulate_stats`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_map

from torchplace.sim.rules import _cuda_ops

__all__ = [
    "PICKS_BACKEND",
    "STATS_OPS",
    "accumulate_stats",
    "batch_norm_backend",
    "conv_backend",
    "refusal",
]

_INT32_MAX = 2**31 - 1
#: cuDNN's minimum batch-norm epsilon: ``CUDNN_BN_MIN_EPSILON`` is 0.0 since cuDNN 8
#: (cudnn_ops.h), which ``batchnormMinEpsilonCuDNN`` returns (aten/src/ATen/cuda/detail/
#: CUDAHooks.cpp)
_CUDNN_BN_MIN_EPSILON = 0.0


def batch_norm_backend(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    eps: float,
) -> str:
    """``"cudnn"`` or ``"native"``: aten/src/ATen/native/Normalization.cpp,
    ``_select_batch_norm_backend``, for a CUDA build compiled with cuDNN >= 5.1.10 (the
    MIOpen branch is ROCm's)."""
    bf16, half = torch.bfloat16, torch.float16
    if (
        input.dtype != bf16
        and (weight is None or weight.dtype != bf16)
        and (input.dtype != half or (weight is not None and weight.dtype == torch.float32))
        and weight is not None
        and bias is not None
        and (
            (running_mean is not None and running_var is not None)
            or (running_mean is None and running_var is None and training)
        )
        and input.dim() >= 3
        and ((input.shape[0] <= 880801 and training) or (input.shape[0] <= 65535 and not training))
        and eps >= _CUDNN_BN_MIN_EPSILON
        and torch.backends.cudnn.enabled
        and input.numel() < _INT32_MAX
    ):
        return "cudnn"
    return "native"


def _fake_cuda(mode: Any, t: torch.Tensor) -> Any:
    from torch._subclasses.fake_tensor import FakeTensor

    meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    return FakeTensor(mode, meta, torch.device("cuda", 0))


def conv_backend(args: Sequence[Any]) -> str:
    """The ``ConvBackend`` (its name: ``"Cudnn"``, ``"CudaDepthwise2d"``, ``"Slow2d"``, ...)
    CUDA's ``aten.convolution`` picks for these arguments (input, weight, bias, stride,
    padding, dilation, transposed, output_padding, groups)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    input, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    x, w = _fake_cuda(mode, input), _fake_cuda(mode, weight)
    b = None if bias is None else _fake_cuda(mode, bias)
    picked = torch._C._select_conv_backend(
        x, w, b, stride, padding, dilation, transposed, output_padding, groups, None
    )
    name = str(picked).rsplit(".", 1)[-1]
    if name in ("Cudnn", "CudnnTranspose", "Empty"):
        return name  # a CUDA build's ATen decided it with cuDNN compiled in
    if input.dim() not in (3, 4, 5):
        return name
    dilated = any(d != 1 for d in dilation)
    if _is_depthwise(input, weight, transposed, groups):
        # use_cudnn_depthwise: always for channels-last input; for contiguous fp16 only with
        # cuDNN's depthwise workload heuristics (check_cudnn_depthwise_workload), which
        # this does not port: the refused dtypes are never fp16
        if _suggests_channels_last(input, weight) and _use_cudnn(
            input, weight, dilated, output_padding, stride, dilation
        ):
            return "Cudnn"
        return name
    if _use_cudnn(input, weight, dilated, output_padding, stride, dilation):
        return "CudnnTranspose" if transposed else "Cudnn"
    return name


def _is_depthwise(input: torch.Tensor, weight: torch.Tensor, transposed: bool, groups: int) -> bool:
    """ConvParams::is_depthwise (Convolution.cpp): a 1-d input counts as its 2-d view."""
    dim = 4 if input.dim() == 3 else input.dim()
    return (
        not transposed
        and dim in (4, 5)
        and input.shape[1] == groups
        and groups > 1
        and weight.shape[0] % input.shape[1] == 0
    )


def _suggests_channels_last(input: torch.Tensor, weight: torch.Tensor) -> bool:
    """cudnn_conv_suggest_memory_format (aten/src/ATen/native/ConvUtils.h) is not
    contiguous: the input or the weight is channels-last."""

    def last(t: torch.Tensor) -> bool:
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
        return fmt is not None and not t.is_contiguous() and t.is_contiguous(memory_format=fmt)

    return last(input) or last(weight)


def _use_cudnn(
    input: torch.Tensor,
    weight: torch.Tensor,
    dilated: bool,
    output_padding: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> bool:
    """ConvParams::use_cudnn (Convolution.cpp), for a build compiled with cuDNN >= 8 on a
    GPU of compute capability 8.0 or more (bf16 convolutions and dilated ones supported:
    supportsBFloat16ConvolutionWithCuDNNv8, supportsDilatedConvolutionWithCuDNN)."""
    if not torch.backends.cudnn.enabled:
        return False
    if input.numel() > _INT32_MAX or weight.numel() > _INT32_MAX:
        return False  # needs_64bit_indexing_no_split: a single huge convolution
    # is_output_padding_big: an output padding at least its stride
    big = any(p >= s for p, s in zip(output_padding, stride, strict=False))
    if not _suggests_channels_last(input, weight) and dilated:
        if torch.are_deterministic_algorithms_enabled() or torch.backends.cudnn.deterministic:
            return False  # ConvParams::deterministic: cuDNN's dilated kernels are not
        return not big
    return not big


#: The kernel name each native convolution backend's ``AT_DISPATCH`` switch writes in its
#: refusal; each takes the floating dtypes with fp16 and bf16 (aten/src/ATen/native/cuda/
#: DepthwiseConv2d.cu, DepthwiseConv3d.cu, ConvolutionMM2d.cu, NaiveDilatedConvolution.cu,
#: SlowConvTranspose2d.cu, SlowConvTranspose3d.cu). Slow3d has no CUDA kernel: CUDA takes
#: SlowDilated3d for every 5-d input (Convolution.cpp).
_CONV_KERNELS = {
    "CudaDepthwise2d": "conv_depthwise2d_forward_cuda",
    "CudaDepthwise3d": "conv_depthwise3d",
    "Slow2d": "slow_conv2d_cuda",
    "SlowDilated2d": "slow_conv_dilated<>",
    "SlowDilated3d": "slow_conv_dilated<>",
    "SlowTranspose2d": "slow_conv_transpose2d_out_cuda",
    "SlowTranspose3d": "slow_conv_transpose3d_out_cuda",
}
_CONV_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_CUDNN_BACKENDS = ("Cudnn", "CudnnTranspose")

_ATEN = torch.ops.aten
#: the aten operators whose CUDA kernel picks its backend itself (a dispatch mode sees
#: them): the convolution (Convolution.cpp, ``_convolution``) and the batch norm that
#: updates its running statistics (cuda/Normalization.cu, ``_batch_norm_with_update_cuda``)
PICKS_BACKEND = frozenset({_ATEN.convolution.default, _ATEN._batch_norm_with_update.default})


def _batch_norm_args(func: Any, args: Any, kwargs: Any) -> tuple[Any, ...] | None:
    """(input, weight, bias, running_mean, running_var, training, eps) of a batch norm
    call that picks its backend, else None."""
    schema = func._schema
    named = dict(zip((a.name for a in schema.arguments), args, strict=False)) | dict(kwargs)
    if func is _ATEN._batch_norm_with_update.default:
        training = True
    elif func is _ATEN.native_batch_norm.default:
        training = bool(named["training"])
    else:
        return None
    return (
        named["input"],
        named.get("weight"),
        named.get("bias"),
        named.get("running_mean"),
        named.get("running_var"),
        training,
        float(named["eps"]),
    )


def refusal(
    func: Any,
    rule: _cuda_ops.CudaRule,
    tensors: Sequence[torch.Tensor],
    args: Any,
    kwargs: Any,
    *,
    composite: bool = False,
) -> Exception | None:
    """CUDA's error for a call whose kernel picks a backend (None: the table's refusal
    stands, or CUDA runs it). ``composite``: a ``native_batch_norm`` that
    ``_batch_norm_impl_index`` reached (the ``batch_norm``/``instance_norm`` composites on
    CUDA pick the backend first; a direct call runs the native kernel)."""
    if func is _ATEN.convolution.default:
        backend = conv_backend(args)
        if backend in _CUDNN_BACKENDS:  # cuDNN's own text, where the samples saw it
            texts = rule.texts(tensors, args, kwargs)
            found = [t for t in texts if not _cuda_ops.dispatch_text(t[1])]
            return found[0][0](found[0][1]) if found else None
        kernel = _CONV_KERNELS.get(backend)
        if kernel is None or args[0].dtype in _CONV_DTYPES:
            return None
        return _cuda_ops.dispatch_refusal(kernel, args[0].dtype)
    if func is _ATEN.cudnn_batch_norm.default and composite:
        # a build with cuDNN picked it itself (the composite's choice on fake CUDA tensors)
        inputs = [t for t in args[:5] if isinstance(t, torch.Tensor)]
        return _cudnn_batch_norm_refusal(rule, inputs)
    if func is _ATEN._batch_norm_with_update.default or (
        composite and func is _ATEN.native_batch_norm.default
    ):
        picked = _batch_norm_args(func, args, kwargs)
        if picked is None:
            return None
        backend = batch_norm_backend(*picked)
        # the operator that backend runs: cudnn_batch_norm, or the native kernel
        # (batch_norm_cuda, as native_batch_norm runs it)
        target = (
            _ATEN.cudnn_batch_norm.default
            if backend == "cudnn"
            else _ATEN.native_batch_norm.default
        )
        other = _cuda_ops.rule_for(target)
        if other is None:
            return None
        found = [t for t in picked[:5] if isinstance(t, torch.Tensor)]
        if backend == "cudnn":
            return _cudnn_batch_norm_refusal(other, found)
        return other.refusal(found, (), {})
    return None


def _cudnn_batch_norm_refusal(
    rule: _cuda_ops.CudaRule, inputs: list[torch.Tensor]
) -> Exception | None:
    """``cudnn_batch_norm``'s refusal of (input, weight, bias[, running_mean, running_var]).
    Without running statistics (training) the signature may be one the samples never made:
    cuDNN refuses the input's dtype first (aten/src/ATen/native/cudnn/BatchNorm.cpp describes
    the input before anything else; aten/src/ATen/cudnn/Descriptors.cpp,
    getCudnnDataTypeFromScalarType), so the refusal of the call with them in that dtype."""
    refused = rule.refusal(inputs, (), {})
    if refused is None and len(inputs) == 3:
        refused = rule.refusal([*inputs, inputs[0], inputs[0]], (), {})
    return refused


#: Norm kernels whose CUDA version keeps its statistics (mean, inverse standard deviation)
#: in the accumulate type, fp32 for fp16/bf16 input, and returns them for every channel in
#: evaluation too: aten/src/ATen/native/cuda/Normalization.cu (batch_norm_cuda:
#: ``toAccumulateType(self.scalar_type(), /*is_cuda=*/true)``), layer_norm_kernel.cu
#: (layer_norm_cuda: the same for mean and rstd); the CPU kernels keep them in the input's
#: dtype (layer norm) or return none in evaluation (batch norm). torch's meta functions
#: (torch/_decomp/decompositions.py, torch/_refs) give CUDA's.
STATS_OPS = frozenset(
    {
        _ATEN.native_batch_norm.default,
        _ATEN._native_batch_norm_legit.default,
        _ATEN._native_batch_norm_legit.no_stats,
        _ATEN._native_batch_norm_legit_no_training.default,
        _ATEN._batch_norm_with_update.default,
        _ATEN.native_layer_norm.default,
    }
)
_NARROW = (torch.float16, torch.bfloat16)


def accumulate_stats(func: Any, args: Any, kwargs: Any, out: Any) -> Any:
    """A :data:`STATS_OPS` call's outputs as CUDA's kernel gives them: statistics of
    fp16/bf16 input computed and kept in fp32, and (evaluation) one for each channel."""
    if not isinstance(out, tuple):
        return out
    x = args[0] if args else kwargs.get("input")
    narrow = isinstance(x, torch.Tensor) and x.dtype in _NARROW
    if not narrow and all(o.numel() for o in out if isinstance(o, torch.Tensor)):
        return out
    expected = _cuda_ops.expected_outputs(func, args, kwargs)
    if not isinstance(expected, (tuple, list)) or len(expected) != len(out):
        if not narrow:
            return out
        # no meta function for this call (_batch_norm_with_update without a weight, torch
        # 2.13): the statistics (the floating outputs after the first) in fp32
        expected = [
            o if i == 0 or not o.is_floating_point() else o.to("meta", torch.float32)
            for i, o in enumerate(out)
        ]
    wants = [(e.dtype, e.shape) if isinstance(e, torch.Tensor) else None for e in expected]
    if all(
        not isinstance(o, torch.Tensor) or (o.dtype, o.shape) == w
        for o, w in zip(out, wants, strict=True)
    ):
        return out
    if narrow:  # computed in fp32, as CUDA computes them; written arguments copied back
        wide = functools.partial(_widen, plan=dict.fromkeys(_NARROW, torch.float32))
        wide_args, wide_kwargs = tree_map(wide, (args, kwargs))
        computed = func(*wide_args, **wide_kwargs)
        _copy_written(func, args, kwargs, wide_args, wide_kwargs)
    else:
        computed = out
    fixed = []
    for o, w in zip(computed, wants, strict=True):
        if not isinstance(o, torch.Tensor) or w is None:
            fixed.append(o)
        elif o.shape != w[1]:  # evaluation: CUDA leaves them unset; zeros stand in
            fixed.append(torch.zeros(w[1], dtype=w[0], device=o.device))
        else:
            fixed.append(o.to(w[0]))
    return tuple(fixed)


def _widen(a: Any, plan: dict[torch.dtype, torch.dtype]) -> Any:
    if isinstance(a, torch.Tensor) and a.dtype in plan:
        return a.to(plan[a.dtype])
    return a


def _copy_written(func: Any, args: Any, kwargs: Any, wide_args: Any, wide_kwargs: Any) -> None:
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        if i < len(args):
            target, result = args[i], wide_args[i]
        elif a.name in kwargs:
            target, result = kwargs[a.name], wide_kwargs[a.name]
        else:
            continue
        if isinstance(target, torch.Tensor) and target is not result:
            target.copy_(result)
