"""Which kernel an aten operation runs on a GPU, and its *signature*: the few numbers
that decide its time (a matrix product's m, n, k; a convolution's shapes; an attention
kernel's FLOPs; a memory-bound kernel's bytes and launches).

A signature is a plain tuple, hashable and cheap to build from the shapes the cost model
already reads; :class:`torchplace.timemodel.device.DeviceModel` prices each signature
once per GPU, and the simulator's trace keeps them so that a run recorded on one GPU is
re-priced on another (``torchplace sim --gpu all``).

Examples:
    >>> import torch
    >>> from torchplace.timemodel.kernels import kernel_class
    >>> aten = torch.ops.aten
    >>> kernel_class(aten.mm.default), kernel_class(aten.add.Tensor)
    ('gemm', 'mem')
    >>> kernel_class(aten._scaled_dot_product_flash_attention.default)
    'attn'
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = [
    "KERNEL_CLASSES",
    "attention_signature",
    "conv_signature",
    "conv_tf32",
    "gemm_dims",
    "kernel_class",
    "memory_signature",
]  # fmt: skip

_aten = torch.ops.aten
KERNEL_CLASSES = ("gemm", "conv", "attn", "mem")

# Matrix products: (first matrix's argument index, second's)
_GEMMS = {
    _aten.mm: (0, 1), _aten.addmm: (1, 2), _aten.bmm: (0, 1), _aten.baddbmm: (1, 2),
    _aten.addbmm: (1, 2), _aten._scaled_mm: (0, 1),
}  # fmt: skip
_CONVS = {_aten.convolution, _aten.convolution_backward}
_ATTENTION = {
    _aten._scaled_dot_product_flash_attention: ("flash", False),
    _aten._scaled_dot_product_flash_attention_backward: ("flash", True),
    _aten._scaled_dot_product_efficient_attention: ("efficient", False),
    _aten._scaled_dot_product_efficient_attention_backward: ("efficient", True),
    _aten._scaled_dot_product_cudnn_attention: ("cudnn", False),
    _aten._scaled_dot_product_cudnn_attention_backward: ("cudnn", True),
    _aten._flash_attention_forward: ("flash", False),
    _aten._flash_attention_backward: ("flash", True),
    _aten._efficient_attention_forward: ("efficient", False),
    _aten._efficient_attention_backward: ("efficient", True),
}
# Normalisations that read their input twice: a statistics pass, then the elementwise one
# (aten/src/ATen/native/cuda/Normalization.cuh: batch_norm_collect_statistics then
# batch_norm_elementwise; the backward reduces grad_output·x before it writes grad_input;
# layer and group norm's backward compute the weight gradients in a kernel of their own).
_TWO_PASS_FORWARD = {
    _aten.native_batch_norm, _aten._native_batch_norm_legit, _aten.cudnn_batch_norm,
    _aten._native_batch_norm_legit_functional, _aten.native_group_norm,
}  # fmt: skip
_TWO_PASS_BACKWARD = {
    _aten.native_batch_norm_backward, _aten.cudnn_batch_norm_backward,
    _aten.native_layer_norm_backward, _aten.native_group_norm_backward,
}  # fmt: skip


def kernel_class(func: Any) -> str:
    """``"gemm"``, ``"conv"``, ``"attn"`` or ``"mem"`` for an aten overload that runs a
    kernel."""
    packet = getattr(func, "overloadpacket", func)
    if packet in _GEMMS:
        return "gemm"
    if packet in _CONVS:
        return "conv"
    if packet in _ATTENTION:
        return "attn"
    return "mem"


def gemm_dims(func: Any, args: Any, out: Any) -> tuple[int, int, int, int]:
    """(m, n, k, batch) of a matrix product."""
    first, second = _GEMMS[func.overloadpacket]
    a, b = args[first], args[second]
    k = int(a.shape[-1])
    n = int(b.shape[-1])
    if a.dim() == 3:
        batch, m = int(a.shape[0]), int(a.shape[1])
        if func.overloadpacket is _aten.addbmm:  # batches summed into one output
            return m, n, k, batch
        return m, n, k, batch
    return int(a.shape[0]), n, k, 1


def attention_signature(
    func: Any, args: Any, kwargs: Any, flops: float, precision: str, nbytes: int
) -> tuple[Any, ...]:
    """``("attn", kernel, backward, flops, causal, precision, nbytes)``."""
    kernel, backward = _ATTENTION[func.overloadpacket]
    causal = _argument(func, args, kwargs, "is_causal", False)
    return ("attn", kernel, backward, flops, bool(causal), precision, nbytes)


def _argument(func: Any, args: Any, kwargs: Any, name: str, default: Any) -> Any:
    if name in kwargs:
        return kwargs[name]
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            return args[i] if i < len(args) else default
    return default


def conv_tf32() -> bool:
    """Whether float32 convolutions run on TF32 tensor cores: cuDNN's flag
    (``torch.backends.cudnn.allow_tf32``, True by default, or the newer
    ``torch.backends.cudnn.conv.fp32_precision``), read as the script set it."""
    getter = getattr(torch._C, "_get_fp32_precision_getter", None)
    if getter is not None:
        try:
            precision = getter("cuda", "conv")
        except RuntimeError:
            precision = "none"
        if precision in ("tf32", "ieee"):
            return precision == "tf32"
    try:
        return bool(torch._C._get_cudnn_allow_tf32())
    except RuntimeError:  # legacy and new APIs mixed: the new one decided above
        return True


def matmul_tf32() -> bool:
    """Whether float32 matrix products run on TF32 tensor cores:
    ``torch.backends.cuda.matmul.allow_tf32`` (False by default), which
    ``torch.set_float32_matmul_precision("high")`` sets, or the newer
    ``torch.backends.cuda.matmul.fp32_precision``, read as the script set it."""
    try:
        return bool(torch._C._get_cublas_allow_tf32())
    except RuntimeError:  # legacy and new APIs mixed: ask the new one
        getter = getattr(torch._C, "_get_fp32_precision_getter", None)
        return getter is not None and getter("cuda", "matmul") == "tf32"


def conv_signature(func: Any, args: Any, out: Any, precision: str, nbytes: int) -> tuple[Any, ...]:
    """The signature of ``aten.convolution`` or ``aten.convolution_backward``:
    ``("conv", passes, precision, channels_last, n, c_in, h, w, c_out, kh, kw, h_out,
    w_out, groups, nbytes, activation_bytes)``; 1-D and 3-D convolutions are folded into
    the same height × width."""
    backward = func.overloadpacket is _aten.convolution_backward
    if backward:
        grad_out, x, weight = args[0], args[1], args[2]
        transposed, groups, mask = bool(args[7]), int(args[9]), args[10]
        passes = "d" * bool(mask[0]) + "w" * bool(mask[1])
        y = grad_out
        activations = grad_out.nbytes + x.nbytes * (1 + bool(mask[0]))
    else:
        x, weight = args[0], args[1]
        transposed, groups = bool(args[6]), int(args[8])
        passes = "f"
        y = out
        activations = x.nbytes + out.nbytes
    if transposed:  # a transposed convolution is the data gradient of a plain one
        x, y = y, x
        passes = passes.translate(str.maketrans("fd", "df"))
    n, c_in = int(x.shape[0]), int(x.shape[1])
    c_out = int(y.shape[1])
    spatial_in = math.prod(int(s) for s in x.shape[2:])
    spatial_out = math.prod(int(s) for s in y.shape[2:])
    window = math.prod(int(s) for s in weight.shape[2:])
    # cuDNN runs channels-last when the input or the weight is (ConvUtils.h,
    # cudnn_conv_suggest_memory_format)
    channels_last = any(
        t.dim() == 4 and t.shape[1] > 1 and not t.is_contiguous()
        and t.is_contiguous(memory_format=torch.channels_last)
        for t in (x, weight)
    )  # fmt: skip
    return ("conv", passes or "d", precision, channels_last, n, c_in, spatial_in, 1,
            c_out, window, 1, spatial_out, 1, groups, nbytes, activations)  # fmt: skip


_LAUNCHES: dict[tuple[int, int, int], int] = {}


def plain_memory(func: Any) -> bool:
    """Whether a memory-bound kernel's signature is ``("mem", bytes, 1)``: not a two-pass
    normalisation, not a multi-tensor kernel (:func:`memory_signature` handles those)."""
    packet = getattr(func, "overloadpacket", func)
    name = getattr(packet, "__name__", "")
    return not (
        packet in _TWO_PASS_FORWARD
        or packet in _TWO_PASS_BACKWARD
        or name.startswith(("_foreach_", "_fused_"))
    )


def memory_signature(func: Any, args: Any, nbytes: int) -> tuple[Any, ...]:
    """``("mem", bytes, launches)`` of a kernel without counted FLOPs: the second read of
    the two-pass normalisations added, and the launches of multi-tensor kernels."""
    packet = func.overloadpacket
    if packet in _TWO_PASS_FORWARD and _training(func, args) and not _persistent(packet, args):
        nbytes += args[0].nbytes
    elif packet in _TWO_PASS_BACKWARD and not _persistent(packet, args):
        nbytes += args[0].nbytes + args[1].nbytes
    name = packet.__name__
    if name.startswith(("_foreach_", "_fused_")):
        lists = [
            a for a in args if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor)
        ]
        if lists:
            key = (len(lists[0]), len(lists), nbytes)  # an optimizer repeats its lists
            count = _LAUNCHES.get(key)
            if count is None:
                from torchplace.timemodel.memory import launches

                elements = sum(int(t.numel()) for t in lists[0])
                count = _LAUNCHES[key] = launches(key[0], key[1], elements)
                if len(_LAUNCHES) > 4096:
                    _LAUNCHES.clear()
            return ("mem", nbytes, count)
    return ("mem", nbytes, 1)


def _persistent(packet: Any, args: Any) -> bool:
    """Whether cuDNN runs a batch norm in its persistent mode: in training, on
    channels-last input (aten/src/ATen/native/cudnn/BatchNorm.cpp, getCudnnBatchNormMode:
    CUDNN_BATCHNORM_SPATIAL_PERSISTENT), whose kernels keep the input on chip between the
    statistics and the normalisation: one read, not two."""
    if packet in (_aten.native_layer_norm_backward, _aten.native_group_norm_backward,
                  _aten.native_group_norm):  # fmt: skip
        return False
    x = args[0]
    return bool(x.dim() == 4 and x.shape[1] > 1 and not x.is_contiguous()
                and x.is_contiguous(memory_format=torch.channels_last))  # fmt: skip


def _training(func: Any, args: Any) -> bool:
    if func.overloadpacket is _aten.native_group_norm:
        return True
    return bool(_argument(func, args, {}, "training", True))
