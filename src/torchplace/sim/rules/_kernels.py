"""Real values for CUDA-only kernels (attention, SyncBatchNorm statistics), computed on the CPU.

For ``scaled_dot_product_attention`` a GPU runs its flash or memory-efficient kernel
(``aten._scaled_dot_product_flash_attention`` / ``_scaled_dot_product_efficient_attention``
and their backward), which have no CPU implementation. The simulator calls the same
operators in both value modes, so memory, transfers and the time estimate do not depend on
the backing. With placeholder values their meta functions run; with real values they run
here:

- every output has the shape, dtype and strides the meta function gives it — the GPU's
  layout (a padded log-sum-exp, the philox state), so later views and copies match too;
- the values come from the CPU's flash-attention kernel, or from the attention formula
  when dropout is on (its mask drawn from a seed taken from the simulated GPU's generator,
  returned as the kernel's philox seed so that backward draws the same mask);
- backward recomputes the attention weights and applies the formula's gradient (or, without
  dropout or bias, runs the CPU flash kernel's backward on the forward's saved output and
  log-sum-exp).

The GPU's own kernels round differently (tiling, fp32 accumulation); see docs/sim.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_map

from torchplace.cost import arguments_key, remembered

__all__ = ["REAL_KERNELS"]

_aten = torch.ops.aten
_FLASH = _aten._scaled_dot_product_flash_attention.default
_FLASH_BACKWARD = _aten._scaled_dot_product_flash_attention_backward.default
_EFFICIENT = _aten._scaled_dot_product_efficient_attention.default
_EFFICIENT_BACKWARD = _aten._scaled_dot_product_efficient_attention_backward.default
_CPU_FLASH = _aten._scaled_dot_product_flash_attention_for_cpu.default
_CUDNN = _aten._scaled_dot_product_cudnn_attention.default
_CUDNN_BACKWARD = _aten._scaled_dot_product_cudnn_attention_backward.default


def _meta(func: Any, args: Any, kwargs: Any) -> Any:
    """The meta function's outputs: the GPU kernel's shapes, dtypes and strides (only read,
    never written, so a training loop's repeated calls share them: the meta function takes
    a tenth of a small attention kernel's CPU time)."""

    def evaluate() -> Any:
        margs, mkwargs = tree_map(_to_meta, (args, kwargs))
        return func(*margs, **mkwargs)

    key = (func, arguments_key(args, _layout), arguments_key(kwargs, _layout))
    return remembered(_METAS, key, 256, evaluate)


def _to_meta(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
    return a


#: (operator, argument signature) -> its meta outputs
_METAS: dict[tuple[Any, ...], Any] = {}


def _layout(t: torch.Tensor) -> tuple[Any, ...]:
    """What a meta function reads of a tensor."""
    return (t.shape, t.stride(), t.dtype)


def _filled(meta: torch.Tensor, values: torch.Tensor | None = None) -> torch.Tensor:
    if (
        values is not None
        and values.dtype == meta.dtype
        and values.shape == meta.shape
        and values.stride() == meta.stride()
        and values.storage_offset() == 0
        and values.untyped_storage().nbytes() == values.numel() * values.element_size()
    ):
        return values  # already in the GPU's layout, alone in its storage
    out = torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype)
    if values is not None:
        out.copy_(values)
    return out


def _scores(
    q: torch.Tensor,
    k: torch.Tensor,
    bias: torch.Tensor | None,
    is_causal: bool,
    scale: float,
    diagonal: int = 0,
) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:  # top-left aligned, as the docs of scaled_dot_product_attention say
        # (diagonal: seq_k - seq_q for the bottom-right alignment of FlashAttention-2's
        # kernels and the memory-efficient kernel's LowerRight mask)
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool).tril(diagonal)
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores if bias is None else scores + bias.float()


def _dropout_mask(shape: torch.Size, dropout_p: float, seed: int) -> torch.Tensor:
    draw = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=draw) >= dropout_p) / (1.0 - dropout_p)


def _grouped(q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    """Keys or values with fewer heads than the queries (grouped-query attention: query head
    h reads head h // (Hq / Hkv)), repeated to the queries' heads for the CPU's kernels."""
    groups = q.shape[-3] // kv.shape[-3]
    return kv if groups == 1 else kv.repeat_interleave(groups, dim=-3)


def _summed(grad: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    """The gradient of repeated keys or values, summed back over each group."""
    heads = kv.shape[-3]
    if grad.shape[-3] == heads:
        return grad
    shape = (*grad.shape[:-3], heads, grad.shape[-3] // heads, *grad.shape[-2:])
    return grad.reshape(shape).sum(-4)


def _attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    seed: int,
    diagonal: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, log-sum-exp over the keys)."""
    k, v = _grouped(q, k), _grouped(q, v)
    if dropout_p == 0.0 and (diagonal == 0 or not is_causal):
        out, lse = _CPU_FLASH(q, k, v, 0.0, is_causal, attn_mask=bias, scale=scale)
        return out, lse
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = _scores(q.float(), k.float(), bias, is_causal, scale, diagonal)
    lse = torch.logsumexp(scores, dim=-1)
    weights = torch.exp(scores - lse.unsqueeze(-1))
    if dropout_p:
        weights = weights * _dropout_mask(weights.shape, dropout_p, seed)
    out = weights @ v.float()
    return out.to(q.dtype), lse


def _backward(
    grad_out: torch.Tensor,
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None],
    saved: tuple[torch.Tensor, torch.Tensor],
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    seed: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Gradients of q, k, v and the bias (its broadcast dimensions summed), from the
    attention formula (autograd does not run below the dispatcher's autograd layer), or,
    without dropout or bias, from the CPU flash kernel's backward given the forward's
    ``saved`` output and log-sum-exp (computed by that kernel's forward in ``_attention``)."""
    q, kv_k, kv_v, bias = inputs
    k, v = _grouped(q, kv_k), _grouped(q, kv_v)
    if dropout_p == 0.0 and bias is None:
        out, lse = saved[0], saved[1][..., : q.shape[-2]]  # the GPU's lse rows are padded
        grads = _aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad_out, q, k, v, out, lse, 0.0, is_causal, scale=scale
        )
        return grads[0], _summed(grads[1], kv_k), _summed(grads[2], kv_v), None
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    qf, kf, vf, go = q.float(), k.float(), v.float(), grad_out.float()
    weights = torch.softmax(_scores(qf, kf, bias, is_causal, scale), dim=-1)
    drop = _dropout_mask(weights.shape, dropout_p, seed) if dropout_p else None
    kept = weights if drop is None else weights * drop
    grad_v = kept.transpose(-2, -1) @ go
    grad_kept = go @ vf.transpose(-2, -1)
    grad_weights = grad_kept if drop is None else grad_kept * drop
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True))
    grad_q = grad_scores @ kf * scale
    grad_k = grad_scores.transpose(-2, -1) @ qf * scale
    grad_bias = None
    if bias is not None:
        grad_bias = grad_scores.sum_to_size(bias.shape).to(bias.dtype)
    grad_k, grad_v = _summed(grad_k, kv_k), _summed(grad_v, kv_v)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype), grad_bias


def _seed(generator: torch.Generator, dropout_p: float) -> int:
    """A dropout seed from the simulated GPU's generator (as the kernel advances philox)."""
    if not dropout_p:
        return 0
    draw = getattr(generator, "draw", lambda run: run())  # a simulated CUDA generator's state
    return int(draw(lambda: torch.randint(2**62, (), generator=generator)))


def _efficient(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    q, k, v, bias = args[:4]
    dropout_p = float(args[5] if len(args) > 5 else kwargs.get("dropout_p", 0.0))
    is_causal = bool(args[6] if len(args) > 6 else kwargs.get("is_causal", False))
    scale = kwargs.get("scale")
    out_m, lse_m, _, _ = _meta(_EFFICIENT, args, kwargs)
    seed = _seed(generator, dropout_p)
    out, lse = _attention(q, k, v, bias, dropout_p, is_causal, scale, seed)
    lse_out = _filled(lse_m)
    if lse_out.shape[-1]:  # padded to a multiple of 32 rows on the GPU
        lse_out[..., lse.shape[-1] :] = float("inf")
        lse_out[..., : lse.shape[-1]] = lse
    # outside CUDA-graph capture the seed and offset are host tensors (HOST_OUTPUTS)
    return _filled(out_m, out), lse_out, torch.tensor(seed), torch.tensor(0)


def _efficient_backward(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    grad_out, q, k, v, bias, out, lse, seed_t, _offset, dropout_p = args[:10]
    is_causal = bool(args[11] if len(args) > 11 else kwargs.get("is_causal", False))
    metas = _meta(_EFFICIENT_BACKWARD, args, kwargs)
    scale = kwargs.get("scale")
    grads = _backward(
        grad_out, (q, k, v, bias), (out, lse), dropout_p, is_causal, scale, int(seed_t)
    )
    return tuple(
        None if m is None else _filled(m, g) if g is not None else _filled(m).zero_()
        for m, g in zip(metas, grads, strict=True)
    )


def _flash(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    q, k, v = args[:3]
    dropout_p = float(args[3] if len(args) > 3 else kwargs.get("dropout_p", 0.0))
    is_causal = bool(args[4] if len(args) > 4 else kwargs.get("is_causal", False))
    scale = kwargs.get("scale")
    metas = list(_meta(_FLASH, args, kwargs))
    seed = _seed(generator, dropout_p)
    out, lse = _attention(q, k, v, None, dropout_p, is_causal, scale, seed)
    rng_state = _filled(metas[6])
    rng_state.view(torch.int64).view(-1)[0] = seed  # (seed, offset) on the GPU
    rng_state.view(torch.int64).view(-1)[1:] = 0
    return (
        _filled(metas[0], out),
        _filled(metas[1], lse),
        metas[2],
        metas[3],
        metas[4],
        metas[5],
        rng_state,
        _filled(metas[7]).zero_(),
        _filled(metas[8]).zero_(),
    )


def _flash_backward(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    grad_out, q, k, v, out, lse = args[:6]
    dropout_p, is_causal, rng_state = args[10], args[11], args[12]
    metas = _meta(_FLASH_BACKWARD, args, kwargs)
    seed = int(rng_state.view(torch.int64).view(-1)[0]) if dropout_p else 0
    scale = kwargs.get("scale")
    grads = _backward(grad_out, (q, k, v, None), (out, lse), dropout_p, is_causal, scale, seed)
    return tuple(_filled(m, g) for m, g in zip(metas, grads[:3], strict=True))


def _cudnn(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    q, k, v, bias = args[:4]
    dropout_p = float(args[5] if len(args) > 5 else kwargs.get("dropout_p", 0.0))
    is_causal = bool(args[6] if len(args) > 6 else kwargs.get("is_causal", False))
    scale = kwargs.get("scale")
    metas = list(_meta(_CUDNN, args, kwargs))
    seed = _seed(generator, dropout_p)
    out, lse = _attention(q, k, v, bias, dropout_p, is_causal, scale, seed)
    lse_out = _filled(metas[1])  # (batch, heads, seq_q, 1), empty without log-sum-exp
    if lse_out.numel():
        lse_out.copy_(lse.unsqueeze(-1))
    tensors = [_filled(metas[0], out), lse_out, *metas[2:6]]
    tensors += [_filled(metas[6]).fill_(seed), _filled(metas[7]).zero_(), metas[8]]
    return tuple(tensors)


def _cudnn_backward(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    grad_out, q, k, v, out, lse, seed_t, _offset, bias = args[:9]
    dropout_p, is_causal = float(args[13]), bool(args[14])
    metas = _meta(_CUDNN_BACKWARD, args, kwargs)
    scale = kwargs.get("scale")
    bias = bias if isinstance(bias, torch.Tensor) and bias.numel() else None
    saved = (out, lse.squeeze(-1))
    grads = _backward(grad_out, (q, k, v, bias), saved, dropout_p, is_causal, scale, int(seed_t))
    return tuple(_filled(m, g) for m, g in zip(metas, grads[:3], strict=True))


_FLASH_FORWARD = _aten._flash_attention_forward.default
_EFFICIENT_FORWARD = _aten._efficient_attention_forward.default


def _named(func: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    """An operator's arguments by name, its defaults filled in."""
    found = {}
    for i, a in enumerate(func._schema.arguments):
        if i < len(args):
            found[a.name] = args[i]
        elif a.name in kwargs:
            found[a.name] = kwargs[a.name]
        else:
            found[a.name] = a.default_value if a.has_default_value() else None
    return found


def _dense_only(name: str, given: dict[str, Any], unsupported: tuple[str, ...]) -> None:
    """Refuse plainly what the CPU's attention formula does not compute here."""
    used = [u for u in unsupported if given.get(u) is not None]
    if used:
        raise NotImplementedError(
            f"torchplace sim does not simulate aten.{name} with {', '.join(used)} (variable-"
            "length batches, a sliding window, ALiBi or a paged KV cache): call it with "
            "padded batches, or use torch.nn.functional.scaled_dot_product_attention"
        )


def _flash_forward(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    """``aten._flash_attention_forward`` (query, key, value as (batch, seq, heads, dim)),
    as the FlashAttention-2 kernels compute it: causal masks aligned bottom-right
    (aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp: is_causal sets
    window_size_right = 0, the window anchored at the last key)."""
    given = _named(_FLASH_FORWARD, args, kwargs)
    _dense_only(
        "_flash_attention_forward",
        given,
        ("cum_seq_q", "cum_seq_k", "window_size_left", "window_size_right", "seqused_k",
         "alibi_slopes", "block_table"),
    )  # fmt: skip
    q, k, v = (given[n].transpose(1, 2) for n in ("query", "key", "value"))
    dropout_p, is_causal = float(given["dropout_p"]), bool(given["is_causal"])
    metas = list(_meta(_FLASH_FORWARD, args, kwargs))
    seed = _seed(generator, dropout_p)
    diagonal = k.shape[-2] - q.shape[-2]
    out, lse = _attention(q, k, v, None, dropout_p, is_causal, given["scale"], seed, diagonal)
    rng_state = _filled(metas[2])
    rng_state.view(torch.int64).view(-1)[0] = seed  # (seed, offset) on the GPU
    rng_state.view(torch.int64).view(-1)[1:] = 0
    return (
        _filled(metas[0], out.transpose(1, 2)),
        _filled(metas[1], lse),
        rng_state,
        _filled(metas[3]).zero_(),
        _filled(metas[4]).zero_(),
    )


def _efficient_forward(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    """``aten._efficient_attention_forward`` (query, key, value as (batch, seq, heads,
    dim)); ``custom_mask_type`` 1 is the causal mask aligned top-left, 2 bottom-right
    (aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernel_forward.h,
    CustomMaskType)."""
    given = _named(_EFFICIENT_FORWARD, args, kwargs)
    _dense_only(
        "_efficient_attention_forward",
        given,
        ("cu_seqlens_q", "cu_seqlens_k", "seqlen_k", "window_size"),
    )
    q, k, v = (given[n].transpose(1, 2) for n in ("query", "key", "value"))
    dropout_p, mask = float(given["dropout_p"]), int(given["custom_mask_type"])
    metas = list(_meta(_EFFICIENT_FORWARD, args, kwargs))
    seed = _seed(generator, dropout_p)
    diagonal = k.shape[-2] - q.shape[-2] if mask == 2 else 0
    out, lse = _attention(
        q, k, v, given["bias"], dropout_p, mask != 0, given["scale"], seed, diagonal
    )
    lse_out = _filled(metas[1])
    if lse_out.shape[-1]:  # padded to a multiple of 32 rows on the GPU
        lse_out[..., lse.shape[-1] :] = float("inf")
        lse_out[..., : lse.shape[-1]] = lse
    # outside CUDA-graph capture the seed and offset are host tensors (HOST_OUTPUTS)
    return (
        _filled(metas[0], out.transpose(1, 2)),
        lse_out,
        torch.tensor(seed),
        torch.tensor(0),
        *metas[4:],
    )


def _gather_stats(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    """``batch_norm_gather_stats`` (SyncBatchNorm): every rank's mean and invstd, each
    over ``count`` elements, merged as CUDA's ``batch_norm_reduce_statistics_kernel`` does
    (aten/src/ATen/native/cuda/Normalization.cuh): a Welford merge in the accumulate type,
    one rank after another; running stats updated in place with the unbiased variance."""
    a = _named(_aten.batch_norm_gather_stats.default, args, kwargs)
    counts = [float(a["count"])] * a["mean"].shape[0]
    return _reduce_statistics(a, counts)


def _gather_stats_with_counts(args: Any, kwargs: Any, generator: torch.Generator) -> Any:
    """``batch_norm_gather_stats_with_counts``: as :func:`_gather_stats`, each rank with its
    own count (Normalization.cu ``batch_norm_gather_stats_with_counts_cuda``)."""
    a = _named(_aten.batch_norm_gather_stats_with_counts.default, args, kwargs)
    return _reduce_statistics(a, [float(c) for c in a["counts"].tolist()])


def _reduce_statistics(a: dict[str, Any], counts: list[float]) -> Any:
    mean, invstd = a["mean"], a["invstd"]
    # accscalar_t: float for float, half and bfloat16, double for double
    acc = torch.float64 if mean.dtype == torch.float64 else torch.float32
    eps, momentum = float(a["eps"]), float(a["momentum"])
    avg = torch.zeros(mean.shape[1], dtype=acc)
    var_n = torch.zeros(mean.shape[1], dtype=acc)
    n = 0.0
    for j, count in enumerate(counts):
        m = mean[j].to(acc)
        v = (1.0 / invstd[j].to(acc)) ** 2
        v = (v - eps) * count
        factor = 1.0 / (n + count)
        var_n += v + (avg - m) * (avg - m) * (n * count * factor)
        avg = n * factor * avg + count * factor * m
        n += count
    out_mean = avg.to(mean.dtype)
    out_invstd = (1.0 / torch.sqrt(var_n / n + eps)).to(mean.dtype)
    running_mean, running_var = a.get("running_mean"), a.get("running_var")
    if running_mean is not None:
        running_mean.copy_((1 - momentum) * running_mean.to(acc) + momentum * avg)
    if running_var is not None:
        unbiased = var_n / (n - 1)
        running_var.copy_((1 - momentum) * running_var.to(acc) + momentum * unbiased)
    return out_mean, out_invstd


#: aten operator -> its real-values implementation, called as ``kernel(args, kwargs,
#: generator)`` with the simulated GPU's random generator.
REAL_KERNELS: dict[Any, Callable[[Any, Any, torch.Generator], Any]] = {
    _EFFICIENT: _efficient,
    _EFFICIENT_BACKWARD: _efficient_backward,
    _FLASH: _flash,
    _FLASH_BACKWARD: _flash_backward,
    _CUDNN: _cudnn,
    _CUDNN_BACKWARD: _cudnn_backward,
    _FLASH_FORWARD: _flash_forward,
    _EFFICIENT_FORWARD: _efficient_forward,
    _aten.batch_norm_gather_stats.default: _gather_stats,
    _aten.batch_norm_gather_stats_with_counts.default: _gather_stats_with_counts,
}
