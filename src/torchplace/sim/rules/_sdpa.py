"""Which kernel CUDA's ``scaled_dot_product_attention`` runs, ported from PyTorch.

``F.scaled_dot_product_attention`` on a CUDA tensor asks ``select_sdp_backend``
(aten/src/ATen/native/transformers/cuda/sdp_utils.cpp) for a kernel: it walks the priority
order (flash, memory-efficient, math, cuDNN — cuDNN first on sm90/sm10x with cuDNN > 9.15)
and takes the first backend whose checks (``can_use_flash_attention``,
``can_use_mem_efficient_attention``, ``can_use_cudnn_attention``) all pass. When none
passes and the math kernel is switched off (``torch.nn.attention.sdpa_kernel``,
``torch.backends.cuda.enable_math_sdp(False)``), it runs the checks again to warn why
("Memory efficient kernel not used because:", then each reason) and raises "No available
kernel. Aborting execution.".

Each check below is a port of the function it names (sdp_utils.cpp, or the shared
aten/src/ATen/native/transformers/sdp_utils_cpp.h), with its message, at torch 2.14.1: the
source read is pytorch/pytorch's sdp_utils.cpp as of the 2.14 development line, and every
message was checked against the strings of the 2.14.1 CUDA wheel's libtorch_cuda.so (which
also shows the two checks newer than that source: the cuDNN decode guard and the 9.19-9.25
range). Each check takes what the GPU would answer (compute capability, the cuDNN version)
from the simulated GPU, and the rest from PyTorch's own global settings, which
``sdpa_kernel`` and ``torch.backends.cuda.enable_*_sdp`` change in the CPU build as well.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "CUDNN", "EFFICIENT", "FLASH", "MATH", "Gpu", "Params", "installed", "select", "validate",
]  # fmt: skip

FLASH, EFFICIENT, CUDNN, MATH = "flash", "memory-efficient", "cuDNN", "math"
# at::SDPBackend (c10/core/SDPBackend? aten/src/ATen/Context.h): the integers
# torch._C._get_sdp_priority_order() returns
_BACKENDS = {0: MATH, 1: FLASH, 2: EFFICIENT, 3: CUDNN, 4: "overrideable"}
_F16, _BF16, _F32 = torch.float16, torch.bfloat16, torch.float32
# c10 ScalarType names, as TORCH_WARN prints them
_NAMES = {
    torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
    torch.float64: "Double", torch.float8_e4m3fn: "Float8_e4m3fn",
}  # fmt: skip


@dataclass(frozen=True)
class Gpu:
    """What the checks read of the device (at::cuda::getCurrentDeviceProperties, and the
    cuDNN runtime version: at::detail::getCUDAHooks().versionRuntimeCuDNN())."""

    major: int
    minor: int
    cudnn: int  # e.g. 92400 for 9.24.0
    rocm_arch: str | None = None  # gcnArchName on AMD GPUs (ROCm builds)


@dataclass(frozen=True)
class Params:
    """sdp_utils_cpp.h ``sdp_params``."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attn_mask: torch.Tensor | None
    dropout: float
    is_causal: bool
    enable_gqa: bool


_Debug = list[str] | None  # messages of failed checks, collected when asked for


def _fail(debug: _Debug, *parts: Any) -> bool:
    if debug is not None:
        debug.append("".join(_text(p) for p in parts))
    return False


def _text(value: Any) -> str:
    """A value as C++'s operator<< prints it in TORCH_WARN."""
    if isinstance(value, torch.dtype):
        return _NAMES.get(value, str(value).removeprefix("torch."))
    if isinstance(value, (torch.Size, tuple, list)):
        return "[" + ", ".join(str(int(v)) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


_warned_once: set[str] = set()


def _fail_once(debug: _Debug, message: str) -> bool:
    """TORCH_WARN_ONCE: the message once per process."""
    if debug is not None and message not in _warned_once:
        _warned_once.add(message)
        debug.append(message)
    return False


# --- sdp_utils_cpp.h -------------------------------------------------------------------
def _input_requires_grad(p: Params) -> bool:
    """input_requires_grad."""
    grads = p.query.requires_grad or p.key.requires_grad or p.value.requires_grad
    return grads and torch.is_grad_enabled()


def _nested(p: Params) -> bool:
    """has_for_nested_inputs (not has_only_dense_inputs)."""
    return p.query.is_nested or p.key.is_nested or p.value.is_nested


def check_tensor_dtype(p: Params, allowed: Sequence[torch.dtype], debug: _Debug) -> bool:
    q = p.query.dtype
    if q == p.key.dtype == p.value.dtype and q in allowed:
        return True
    return _fail(
        debug, "Expected query, key and value to all be of dtype: {",
        ", ".join(_text(d) for d in allowed), "}. Got Query dtype: ", q, ", Key dtype: ",
        p.key.dtype, ", and Value dtype: ", p.value.dtype, " instead.",
    )  # fmt: skip


def check_tensor_shapes(p: Params, debug: _Debug) -> bool:
    dims = p.query.dim(), p.key.dim(), p.value.dim()
    if dims == (4, 4, 4):
        return True
    return _fail(
        debug, "All fused kernels requires query, key and value to be 4 dimensional, but got "
        "Query dim: ", dims[0], ", Key dim: ", dims[1], ", Value dim: ", dims[2], " instead.",
    )  # fmt: skip


def check_for_attn_mask(p: Params, debug: _Debug) -> bool:
    if p.attn_mask is None:
        return True
    return _fail(debug, "Flash Attention does not support non-null attn_mask.")


def check_attn_mask_shape(p: Params, debug: _Debug) -> bool:
    mask = p.attn_mask
    if mask is None:
        return True
    if mask.requires_grad:
        return False
    batch, heads, q_len = p.query.shape[:3]
    kv_len = p.key.shape[2]
    if mask.shape[-2] not in (q_len, 1) or mask.shape[-1] not in (kv_len, 1):
        return False
    if mask.dim() == 2:
        return True
    if mask.dim() == 4 and mask.shape[0] in (1, batch) and mask.shape[1] in (1, heads):
        return True
    return _fail(
        debug, "Please use the following attn mask shapes: ",
        "2d - ({Q_seq_len, 1}  x {KV_seq_len, 1}); ",
        "4d - ({Batch, 1} x {Num_heads, 1} x {Q_seq_len, 1}  x {KV_seq_len, 1})",
    )  # fmt: skip


def check_grouped_query_attention(p: Params, same_kv_heads: bool, debug: _Debug) -> bool:
    """check_grouped_query_attention<requires_same_num_heads>."""
    q, k, v = p.query.shape[-3], p.key.shape[-3], p.value.shape[-3]
    if same_kv_heads and k != v:
        return _fail(
            debug, "Both fused kernels require key and value to have the same num_heads and "
            "batch_size but got: Key sizes: ", p.key.shape, ", Value sizes: ", p.value.shape,
            ", Query sizes: ", p.query.shape, " instead.",
        )  # fmt: skip
    if q % k != 0 or (not same_kv_heads and q % v != 0):
        return _fail(
            debug, "The number of heads in key/value must divide number of heads in query.",
            "Got input Key sizes(): ", k, ", Value sizes(): ", v, ", Query sizes(): ", q,
            " instead.",
        )  # fmt: skip
    return True


def check_batch_size_and_num_heads_dense(
    p: Params, *, gqa: bool, same_kv_heads: bool, mqa: bool, debug: _Debug
) -> bool:
    """check_batch_size_and_num_heads_dense<supports_gqa, requires_same_num_heads,
    supports_mqa>; MQA (key and value with one head, no enable_gqa) as pytorch#191085
    added it."""
    qs, ks, vs = p.query.shape, p.key.shape, p.value.shape
    if not qs[0] == ks[0] == vs[0]:
        return _fail(
            debug, "For dense inputs, both fused kernels require query, key and value to have "
            "the same batch_size. Query.sizes(): ", qs, ", Key.sizes(): ", ks,
            ", Value.sizes(): ", vs, " instead. To broadcast dense inputs, try using unsqueeze "
            "and expand_to before passing them into the kernel.",
        )  # fmt: skip
    if mqa and qs[-3] > 0 and ks[-3] == 1 and vs[-3] == 1:
        return True
    if p.enable_gqa and gqa:
        return check_grouped_query_attention(p, same_kv_heads, debug)
    if not qs[-3] == ks[-3] == vs[-3]:
        return _fail(
            debug, "For dense input, both fused kernels require query, key and value to have "
            "the same num_heads. Query.sizes(): ", qs, ", Key sizes(): ", ks,
            ", Value sizes(): ", vs, " instead. To broadcast dense inputs, try using unsqueeze "
            "and expand_to before passing them into the kernel.",
        )  # fmt: skip
    return True


def check_nonzero_sequence_lengths_dense(p: Params, debug: _Debug) -> bool:
    if p.query.shape[-2] != 0 and p.key.shape[-2] != 0:
        return True
    return _fail(debug, "All fused kernels do not support zero seq_len_q or seq_len_kv.")


def check_last_dim_stride_equals_1_dense(
    p: Params, *, ignore_singleton_dim: bool, debug: _Debug
) -> bool:
    """The attn_mask's stride matters on a GPU (the CPU is exempt)."""
    qkv = p.query.stride(-1) == p.key.stride(-1) == p.value.stride(-1) == 1
    if ignore_singleton_dim:
        qkv = qkv or p.query.shape[-1] == 1
    mask_ok = p.attn_mask is None or p.attn_mask.stride(-1) == 1
    if qkv and mask_ok:
        return True
    parts: list[Any] = [
        "All fused kernels require the last dimension of the input to have stride 1. ",
        "Got Query.stride(-1): ", p.query.stride(-1), ", Key.stride(-1): ", p.key.stride(-1),
        ", Value.stride(-1): ", p.value.stride(-1),
    ]  # fmt: skip
    if p.attn_mask is not None:
        parts += [
            ", Attn_mask.stride(-1): ", p.attn_mask.stride(-1),
            " (GPU backends require attn_mask's last dimension to have stride 1 while the "
            "CPU does not).",
        ]  # fmt: skip
    return _fail(debug, *parts)


def check_runtime_disabled_flash(p: Params, debug: _Debug) -> bool:
    if torch._C._get_flash_sdp_enabled():
        return True
    return _fail(debug, "Flash attention has been runtime disabled.")


def check_runtime_disabled_mem_efficient(p: Params, debug: _Debug) -> bool:
    if torch._C._get_mem_efficient_sdp_enabled():
        return True
    return _fail(debug, "Memory Efficient attention has been runtime disabled.")


# --- sdp_utils.cpp ---------------------------------------------------------------------
def _sm_in(gpu: Gpu, low: tuple[int, int], high: tuple[int, int]) -> bool:
    """check_sm_version<lower, upper>: inclusive."""
    return low <= (gpu.major, gpu.minor) <= high


def _is_half(p: Params) -> bool:
    return p.query.dtype in (_F16, _BF16)


def minimum_gemm_alignment(p: Params, gpu: Gpu) -> int:
    """minimum_gemm_alignment (with use_tensor_cores)."""
    half = _is_half(p)
    tensor_cores = gpu.major >= 8 or (gpu.major >= 7 and half)
    alignment = 4 if gpu.major >= 8 else 1
    if tensor_cores:
        alignment = max(alignment, 128 // (16 if half else 32))
    return alignment


def check_head_dim_size_flash(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    """check_head_dim_size_flash<caller_is_meff=false> (CUDA: at most 256)."""
    q, k, v = p.query.shape[-1], p.key.shape[-1], p.value.shape[-1]
    if q == k == v and q <= 256:
        return True
    return _fail(
        debug, "Flash attention", " requires q,k,v to have the same last dimension and to be "
        "less than or equal to 256.", " Got Query.size(-1): ", q, ", Key.size(-1): ", k,
        ", Value.size(-1): ", v, " instead.",
    )  # fmt: skip


def check_head_dim_size_mem_efficient(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    q, k, v = p.query.shape[-1], p.key.shape[-1], p.value.shape[-1]
    alignment = minimum_gemm_alignment(p, gpu)
    if q == k and q % alignment == 0 and q > 0 and v % alignment == 0 and v > 0:
        return True
    return _fail(
        debug, "Mem efficient attention requires last dimension of inputs to be divisible by ",
        alignment, ". Got Query.size(-1): ", q, ", Key.size(-1): ", k, ", Value.size(-1): ",
        v, " instead.",
    )  # fmt: skip


def check_data_ptr_alignment_mem_efficient(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    """The caching allocator's blocks are 512-byte aligned, so a tensor's alignment is its
    storage offset's."""
    if _nested(p) or gpu.major < 8:
        return True
    alignment = minimum_gemm_alignment(p, gpu) * p.query.element_size()
    tensors = (p.query, p.key, p.value)
    offsets = [t.storage_offset() * t.element_size() for t in tensors]
    if all(t.numel() == 0 or o % alignment == 0 for t, o in zip(tensors, offsets, strict=True)):
        return True
    return _fail(
        debug, "Mem efficient attention on sm80 or newer requires q, k, and v storage offsets "
        "* element_size to be aligned to ", alignment, " bytes. Got query.storage_offset() * "
        "element_size % alignment_bytes: ", offsets[0] % alignment, ", key.storage_offset() * "
        "element_size % alignment_bytes: ", offsets[1] % alignment, ", value.storage_offset() "
        "* element_size % alignment_bytes: ", offsets[2] % alignment, ".",
    )  # fmt: skip


def check_flash_attention_hardware_support(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if _sm_in(gpu, (8, 0), (12, 1)):
        return True
    return _fail(
        debug, "Flash attention only supports gpu architectures in the range [sm80, sm121]. "
        "Attempting to run on a sm ", gpu.major, ".", gpu.minor, " gpu.",
    )  # fmt: skip


def check_mem_efficient_hardware_support(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if _sm_in(gpu, (5, 0), (12, 1)):
        return True
    return _fail(
        debug, "Mem Efficient Attention only supports gpu architectures in the range [sm50, "
        "sm121]. Attempting to run on a sm ", gpu.major, ".", gpu.minor, " gpu.",
    )  # fmt: skip


def check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120(
    p: Params, gpu: Gpu, debug: _Debug
) -> bool:
    if not (
        _input_requires_grad(p) and (_sm_in(gpu, (8, 6), (8, 9)) or _sm_in(gpu, (12, 0), (12, 1)))
    ):
        return True
    head_dim = p.query.shape[-1]
    if head_dim <= 192 or (p.dropout <= 0.0 and head_dim > 224):
        return True
    return _fail(
        debug, "Flash attention currently doesn't support training with head_dim ∈ (192, 224] "
        "or (head_dim ∈ (224, 256] and dropout > 0.0) on gpu architectures in the range[sm86, "
        "sm89].", "Attempting to run with dropout set to: ", float(p.dropout), "and head_dim: ",
        head_dim, " on a sm ", gpu.major, ".", gpu.minor, " gpu.",
    )  # fmt: skip


def check_flash_causal_non_square_seqlens(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if not p.is_causal or _nested(p) or p.query.shape[-2] == p.key.shape[-2]:
        return True
    return _fail(
        debug, "Flash attention does not support the is_causal flag when seqlen_q != seqlen_k. ",
        "Got seqlen_q: ", p.query.shape[-2], " seqlen_k: ", p.key.shape[-2], ". If you would "
        "like to use causal attention with non-square masks, please see CausalAttnMask.",
    )  # fmt: skip


def check_dtypes_low_precision(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    return check_tensor_dtype(p, (_F16, _BF16) if gpu.major >= 8 else (_F16,), debug)


def check_dtypes_flash_attention(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if gpu.major >= 9 and torch._C._get_fa3_sdp_enabled():
        return check_tensor_dtype(p, (torch.float8_e4m3fn, _F16, _BF16), debug)
    return check_dtypes_low_precision(p, gpu, debug)


def _cudnn_sm90_or_10x(gpu: Gpu) -> bool:
    return (gpu.major == 9 and gpu.minor == 0) or gpu.major == 10


def _cudnn_supports_d256(gpu: Gpu) -> bool:
    """cuDNN > 9.22 on sm90/sm10x (not sm107 before 9.25.1), with a cuDNN frontend of at least
    1.24 (kCuDNNFrontendSupportsD256: the 2.14.1 wheel keeps the code that needs it, so its
    frontend is that new)."""
    sm107 = gpu.major == 10 and gpu.minor == 7 and gpu.cudnn <= 92500
    return _cudnn_sm90_or_10x(gpu) and not sm107 and gpu.cudnn > 92200


def _cudnn_decode_disabled(gpu: Gpu) -> bool:
    """The 2.14.1 wheel's guard (pytorch#194927, for pytorch#193893: wrong results decoding
    on Blackwell): cuDNN 9.19-9.25.0 except 9.24.1, on sm10x."""
    return gpu.major == 10 and 91900 <= gpu.cudnn <= 92500 and gpu.cudnn != 92401


def check_cudnn_tensor_shapes(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    b, h = p.query.shape[0], p.query.shape[1]
    if b > 65535 or h > 65535:
        return _fail(
            debug, "cuDNN SDPA does not support batch size or num_heads greater than ", 65535,
            ". Got batch size: ", b, ", num_heads: ", h,
        )  # fmt: skip
    s_q, s_k = p.query.shape[2], p.key.shape[2]
    d_qk, d_v = p.query.shape[3], p.value.shape[3]
    version = gpu.cudnn
    if version < 8903:
        return _fail(debug, "SDPA fprop requires cudnn 8.9.3 or higher")
    if version < 8906 and p.dropout != 0.0:
        return _fail(debug, "Dropout reference is only supported on 8.9.6 onwards.")
    if s_q == 1 and _cudnn_decode_disabled(gpu):
        return _fail(
            debug, "cuDNN SDPA decode is disabled on SM ", gpu.major, ".", gpu.minor,
            " for cuDNN versions 9.19-9.25.0 (except 9.24.1)",
        )  # fmt: skip
    limit = 128
    if _cudnn_supports_d256(gpu):
        limit = 256
    elif _cudnn_sm90_or_10x(gpu) and version >= 91100 and (d_qk, d_v) == (192, 128):
        limit = 192
    if d_qk > limit or d_v > limit:
        return _fail(debug, "head_dim should be no more than ", limit)
    if d_qk % 8 or d_v % 8:
        return _fail(debug, "head_dim should be a multiple of 8")
    if version < 8906 and s_k % 64:
        return _fail(debug, "not-multiple-of-64 seq_kv is not supported below 8.9.6")
    if version < 90000:
        if s_q < 64:
            return _fail(debug, "s_q less than 64 is not supported before cudnn 9.0.0")
        if p.dropout != 0.0 and (s_q % 64 or s_k % 64):
            return _fail(
                debug, "s_q not a multiple of 64 with padding/dropout is not supported with "
                "cudnn version 9.0.0",
            )  # fmt: skip
    if s_k == 1:
        return _fail_once(debug, "cudnn SDPA does not support key/value sequence length 1.")
    if p.dropout != 0.0 and s_q == 1:
        return _fail_once(
            debug, "cudnn SDPA does not support query sequence length 1 with dropout."
        )
    return True


def check_cudnn_d256_bprop_head_dim(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if not _input_requires_grad(p) or not _cudnn_supports_d256(gpu):
        return True
    d_qk, d_v = p.query.shape[3], p.value.shape[3]
    if (d_qk <= 128 and d_v <= 128) or (d_qk, d_v) in ((192, 128), (256, 256)):
        return True
    return _fail(
        debug, "cuDNN SDPA on SM 9.0/10.x does not support backward with these head dimensions. "
        "Got d_qk: ", d_qk, ", d_v: ", d_v,
    )  # fmt: skip


def check_cudnn_hardware_support(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if _sm_in(gpu, (8, 0), (12, 1)):
        return True
    return _fail(
        debug, "cuDNN MHA only supports gpu architectures in the range [sm80, sm121]. "
        "Attempting to run on a sm ", gpu.major, ".", gpu.minor, " gpu.",
    )  # fmt: skip


def check_for_nested_inputs(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    nested = _nested(p)
    if nested and os.environ.get("TORCH_CUDNN_SDPA_NESTED_TENSOR_ENABLED") not in ("1", "ON"):
        return _fail(debug, "Experimental cuDNN SDPA nested tensor support is not enabled.")
    if nested and gpu.major not in (9, 10):
        return _fail(debug, "cuDNN SDPA supports nested tensors on SM 9.0, SM 10.0.")
    return True


def check_runtime_disabled_cudnn(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if torch._C._get_cudnn_sdp_enabled():
        return True
    return _fail(debug, "cuDNN attention has been runtime disabled.")


def check_cudnn_deterministic(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if not torch.are_deterministic_algorithms_enabled():
        return True
    if torch.is_deterministic_algorithms_warn_only_enabled():
        return True
    return _fail(debug, "cuDNN SDPA is not deterministic.")


def check_cudnn_dropout(p: Params, gpu: Gpu, debug: _Debug) -> bool:
    if p.dropout * 16.0 == math.floor(p.dropout * 16.0):
        return True
    return _fail(
        debug, "cuDNN dropout probability resolution is limited to 1/16.Use a dropout "
        "probability that is a multiple of 1/16 to select the cuDNN backend",
    )  # fmt: skip


_Check = Callable[[Params, Gpu, _Debug], bool]


def _shared(check: Callable[[Params, _Debug], bool]) -> _Check:
    return lambda p, gpu, debug: check(p, debug)


def _dense(**options: bool) -> _Check:
    return lambda p, gpu, debug: check_batch_size_and_num_heads_dense(p, debug=debug, **options)


def _stride(ignore_singleton_dim: bool) -> _Check:
    return lambda p, gpu, debug: check_last_dim_stride_equals_1_dense(
        p, ignore_singleton_dim=ignore_singleton_dim, debug=debug
    )


def _run(checks: Sequence[_Check], p: Params, gpu: Gpu, debug: _Debug) -> bool:
    return all(check(p, gpu, debug) for check in checks)


# can_use_flash_attention: general_constraints, then the dense ones
_FLASH = (
    _shared(check_runtime_disabled_flash),
    _shared(check_tensor_shapes),
    _shared(check_for_attn_mask),
    check_head_dim_size_flash,
    check_flash_attention_hardware_support,
    check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120,
    check_flash_causal_non_square_seqlens,
    check_dtypes_flash_attention,
)
_FLASH_DENSE = (
    _dense(gqa=True, same_kv_heads=True, mqa=True),
    _shared(check_nonzero_sequence_lengths_dense),
    _stride(ignore_singleton_dim=True),
)
# can_use_mem_efficient_attention
_EFFICIENT = (
    _shared(check_runtime_disabled_mem_efficient),
    check_mem_efficient_hardware_support,
    _shared(check_tensor_shapes),
    check_head_dim_size_mem_efficient,
    check_data_ptr_alignment_mem_efficient,
)
_EFFICIENT_DENSE = (
    _shared(check_nonzero_sequence_lengths_dense),
    _stride(ignore_singleton_dim=False),
    _dense(gqa=True, same_kv_heads=True, mqa=True),
)
# can_use_cudnn_attention
_CUDNN = (
    check_runtime_disabled_cudnn,
    check_for_nested_inputs,
    _shared(check_tensor_shapes),
    check_cudnn_deterministic,
    check_dtypes_low_precision,
    _shared(check_attn_mask_shape),
    check_cudnn_hardware_support,
    check_cudnn_dropout,
)
_CUDNN_DENSE = (
    _shared(check_nonzero_sequence_lengths_dense),
    _stride(ignore_singleton_dim=True),
    _dense(gqa=True, same_kv_heads=False, mqa=True),
    check_cudnn_tensor_shapes,
    check_cudnn_d256_bprop_head_dim,
)


def can_use_flash_attention(p: Params, gpu: Gpu, debug: _Debug = None) -> bool:
    if gpu.rocm_arch is not None:
        return _rocm(gpu)
    if not _run(_FLASH, p, gpu, debug):
        return False
    return _nested(p) or _run(_FLASH_DENSE, p, gpu, debug)


def can_use_mem_efficient_attention(p: Params, gpu: Gpu, debug: _Debug = None) -> bool:
    if gpu.rocm_arch is not None:
        return _rocm(gpu)
    if not _run(_EFFICIENT, p, gpu, debug):
        return False
    if not _nested(p) and not _run(_EFFICIENT_DENSE, p, gpu, debug):
        return False
    allowed = (_F16, _F32, _BF16) if gpu.major >= 8 else (_F16, _F32)
    return check_tensor_dtype(p, allowed, debug)


def can_use_cudnn_attention(p: Params, gpu: Gpu, debug: _Debug = None) -> bool:
    if gpu.rocm_arch is not None:
        return _fail(debug, "Torch was not compiled with cuDNN attention.")
    if p.dropout > 0.0 and 91100 < gpu.cudnn < 91400:
        return _fail(
            debug, gpu.cudnn, " cuDNN version does not support droppout in SDPA (9.11 - 9.13)."
        )
    if not _run(_CUDNN, p, gpu, debug):
        return False
    return _nested(p) or _run(_CUDNN_DENSE, p, gpu, debug)


def _rocm(gpu: Gpu) -> bool:
    """ROCm builds run both fused kernels through AOTriton, on the architectures it was built
    for (gfx90a, gfx942; sdp_utils.cpp USE_ROCM branches); their finer checks are not
    ported."""
    return (gpu.rocm_arch or "").split(":")[0] in ("gfx90a", "gfx942")


def prefer_cudnn(gpu: Gpu) -> bool:
    """check_prefer_cudnn_attention (a CUDA 13 build): sm90/sm10x with cuDNN newer than 9.15,
    unless TORCH_CUDNN_SDPA_DEPRIORITIZED is set."""
    if os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED") in ("1", "ON", "YES", "TRUE", "Y"):
        return False
    return gpu.rocm_arch is None and gpu.cudnn > 91500 and gpu.major in (9, 10)


_CAN_USE = {
    FLASH: can_use_flash_attention,
    EFFICIENT: can_use_mem_efficient_attention,
    CUDNN: can_use_cudnn_attention,
}
_priority_set: list[bool] = []  # priority_order_init_ (once per process: per simulation)


def priority(gpu: Gpu) -> list[str]:
    """priority_order: the first call on an sm90/sm10x GPU puts cuDNN first (in PyTorch's
    global setting, as CUDA's first call does)."""
    if not _priority_set:
        _priority_set.append(True)
        if prefer_cudnn(gpu):
            torch._C._set_sdp_priority_order([3, 1, 2, 0])
    return [_BACKENDS[b] for b in torch._C._get_sdp_priority_order()]


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """A simulation is a process of its own: the priority order is set up afresh at its
    first call and PyTorch's own put back afterwards."""
    saved = torch._C._get_sdp_priority_order()
    _priority_set.clear()
    try:
        yield
    finally:
        _priority_set.clear()
        torch._C._set_sdp_priority_order(saved)


def _layout(t: torch.Tensor | None) -> Any:
    """What the checks read of a tensor."""
    if t is None:
        return None
    return (t.shape, t.stride(), t.dtype, t.storage_offset(), t.requires_grad, t.is_nested)


def _settings() -> tuple[Any, ...]:
    """What the checks read of PyTorch's settings and the environment."""
    c = torch._C
    return (
        c._get_flash_sdp_enabled(), c._get_mem_efficient_sdp_enabled(),
        c._get_math_sdp_enabled(), c._get_cudnn_sdp_enabled(),
        c._get_overrideable_sdp_enabled(), c._get_fa3_sdp_enabled(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        tuple(c._get_sdp_priority_order()), torch.is_grad_enabled(),
        os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED"),
        os.environ.get("TORCH_CUDNN_SDPA_NESTED_TENSOR_ENABLED"),
    )  # fmt: skip


#: (GPU, layouts, flags, settings) -> the backend chosen (a training step asks the same
#: question for every layer)
_CHOSEN: dict[tuple[Any, ...], str] = {}


def select(p: Params, gpu: Gpu) -> str:
    """select_sdp_backend (and _fused_sdp_choice_cuda's error): the backend CUDA runs."""
    priority(gpu)  # the first call may set the order, which the key reads
    key = (
        gpu, _layout(p.query), _layout(p.key), _layout(p.value), _layout(p.attn_mask),
        p.dropout, p.is_causal, p.enable_gqa, _settings(),
    )  # fmt: skip
    chosen = _CHOSEN.get(key)
    if chosen is None:
        chosen = _select(p, gpu)  # a failure raises (and warns) every time, as on CUDA
        if len(_CHOSEN) > 1024:
            _CHOSEN.clear()
        _CHOSEN[key] = chosen
    return chosen


def _select(p: Params, gpu: Gpu) -> str:
    enabled = {
        MATH: torch._C._get_math_sdp_enabled(),
        FLASH: torch._C._get_flash_sdp_enabled(),
        EFFICIENT: torch._C._get_mem_efficient_sdp_enabled(),
        CUDNN: torch._C._get_cudnn_sdp_enabled(),
    }
    if not any(enabled.values()):
        raise RuntimeError(
            "No viable backend for scaled_dot_product_attention was found. This is likely due "
            "to turning off both the math kernel and the fused kernels."
        )
    for backend in priority(gpu):
        if backend == MATH:
            if enabled[MATH]:
                return MATH
        elif backend in _CAN_USE:
            if _CAN_USE[backend](p, gpu):
                return backend
        elif torch._C._get_overrideable_sdp_enabled():
            raise RuntimeError("Invalid backend")
    for title, backend in (
        ("Memory efficient kernel not used because:", EFFICIENT),
        ("Flash attention kernel not used because:", FLASH),
        ("cuDNN attention kernel not used because:", CUDNN),
    ):
        reasons: list[str] = []
        _CAN_USE[backend](p, gpu, reasons)
        for text in (title, *reasons):
            warn(text)
    raise RuntimeError("No available kernel. Aborting execution.")


def validate(p: Params, device: Callable[[torch.Tensor], str], scale: Any) -> None:
    """attention.cpp validate_sdpa_input, with the simulated devices' names."""
    q, k, v, mask = p.query, p.key, p.value, p.attn_mask
    if not q.dtype == k.dtype == v.dtype:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_meta_name(q.dtype)} key.dtype: {_meta_name(k.dtype)} and value.dtype: "
            f"{_meta_name(v.dtype)} instead."
        )
    devices = device(q), device(k), device(v)
    if len(set(devices)) > 1:
        raise RuntimeError(
            "Expected query, key, and value to have the same device type, but got "
            f"query.device: {devices[0]} key.device: {devices[1]} and value.device: "
            f"{devices[2]} instead."
        )
    if min(q.dim(), k.dim(), v.dim()) < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {q.dim()} key.dim: {k.dim()} and value.dim: {v.dim()} instead."
        )
    if mask is not None:
        if mask.dtype not in (torch.bool, _F32, q.dtype):
            raise RuntimeError(
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                f"attn_mask.dtype: {_meta_name(mask.dtype)} and  query.dtype: "
                f"{_meta_name(q.dtype)} instead."
            )
        if q.is_nested or k.is_nested:
            raise RuntimeError(
                "Scaled_dot_product_attention: Nested tensors for query / key are not supported "
                "when an explicit attn_mask is set"
            )


def _meta_name(dtype: torch.dtype) -> str:
    """caffe2::TypeMeta's name, as ``query.dtype()`` prints ("c10::Half", "float")."""
    names = {
        _F16: "c10::Half", _BF16: "c10::BFloat16", _F32: "float", torch.float64: "double",
        torch.bool: "bool", torch.int64: "long int", torch.int32: "int",
    }  # fmt: skip
    return names.get(dtype, str(dtype).removeprefix("torch."))


def warn(message: str) -> None:
    """TORCH_WARN from inside the operator: a UserWarning at the caller's line (the first
    frame outside torch and torchplace)."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and _internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    warnings.warn(message, UserWarning, stacklevel=level)


_INTERNAL = (f"{os.sep}torch{os.sep}", f"{os.sep}torchplace{os.sep}")


def _internal(filename: str) -> bool:
    return any(part in filename for part in _INTERNAL)
