"""The workloads of the published measurements, written in plain PyTorch.

Each one reproduces the structure of the code that was measured (the layers, the kernels
they launch, the optimizer and the precision), not its data: the measurements used
synthetic data or fixed-size batches, and the simulator prices kernels by their shapes.
They run unchanged on a real GPU (``benchmarks/timing/profile_gpu.py``) and under
``torchplace.simulate`` (``benchmarks/timing_accuracy.py``).

- ``resnet50-train`` / ``resnet50-infer``: ResNet-50 v1.5 (the stride in the 3×3
  convolution), as NVIDIA's DeepLearningExamples ConvNets: SGD with momentum 0.875 and
  weight decay (the per-parameter loop of the PyTorch 1.x it ran on), label smoothing 0.1,
  AMP through autocast and a static-scale GradScaler, channels-last where the run used
  ``--memory-format nhwc``.
- ``bert-large-squad``: BERT-large (24 layers, 1024 wide, 16 heads, FFN 4096) with the
  SQuAD span head at sequence length 384, as DeepLearningExamples' ``run_squad.py``:
  attention as explicit batched products, softmax and dropout; ``fp16-o2`` is apex AMP O2
  (a half-precision model, float32 master weights updated by a fused Adam, one
  multi-tensor copy each way); ``fp32``/``tf32`` uses an unfused per-parameter Adam
  (BertAdam).
- ``gpt2-train``: GPT-2 124M as nanoGPT / llm.c's ``train_gpt2.py``: 12 layers, 768 wide,
  fused AdamW, gradient clipping; ``attention=math`` runs the explicit masked softmax
  (llm.c's script in April 2024), otherwise ``scaled_dot_product_attention(is_causal=True)``.
- ``llama-decode``: one token of batch-1 decoding with a static KV cache, as gpt-fast's
  ``model.py`` (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention by
  ``repeat_interleave``, ``scaled_dot_product_attention`` with a boolean mask), Llama-2-7B
  or Llama-3-8B shapes.

Examples:
    >>> from benchmarks.timing.workloads import WORKLOADS
    >>> sorted(WORKLOADS)
    ['bert-large-squad', 'gpt2-train', 'llama-decode', 'resnet50-infer', 'resnet50-train']
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["WORKLOADS", "Run", "build"]


@dataclass(frozen=True)
class Run:
    """One measured configuration: what ``build`` needs."""

    workload: str
    precision: str  # fp32, tf32, amp-fp16, amp-bf16, fp16-o2, bf16
    batch: int
    options: dict[str, str] = field(default_factory=dict)

    def option(self, name: str, default: str = "") -> str:
        return self.options.get(name, default)


# --- ResNet-50 v1.5 -----------------------------------------------------------------------


class _Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


def resnet50() -> nn.Module:
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]  # fmt: skip
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(_Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def _resnet(run: Run, train: bool) -> Callable[[], None]:
    amp = run.precision.startswith("amp")
    fmt = torch.channels_last if run.option("channels_last") == "1" else torch.contiguous_format
    model = resnet50().cuda().to(memory_format=fmt)
    x = torch.randn(run.batch, 3, 224, 224, device="cuda").to(memory_format=fmt)
    if not train:
        model.eval()

        def infer() -> None:
            with torch.no_grad(), torch.autocast("cuda", torch.float16, enabled=amp):
                model(x)

        return infer
    y = torch.randint(0, 1000, (run.batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.875, weight_decay=3e-5,
                          foreach=False)  # fmt: skip
    scaler = torch.amp.GradScaler("cuda", init_scale=256.0, growth_interval=10**9, enabled=amp)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", torch.float16, enabled=amp):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


# --- BERT-large ---------------------------------------------------------------------------


class _BertLayer(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.attn_out, self.ln1 = nn.Linear(d, d), nn.LayerNorm(d)
        self.inter, self.out, self.ln2 = nn.Linear(d, ffn), nn.Linear(ffn, d), nn.LayerNorm(d)
        self.drop = nn.Dropout(0.1)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        b, s, d = t.shape
        return t.view(b, s, self.heads, d // self.heads).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.heads) + mask
        probs = self.drop(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(b, s, d)
        x = self.ln1(self.drop(self.attn_out(ctx)) + x)
        return self.ln2(self.drop(self.out(F.gelu(self.inter(x)))) + x)


class _BertQA(nn.Module):
    def __init__(self, layers: int = 24, d: int = 1024, heads: int = 16, ffn: int = 4096) -> None:
        super().__init__()
        self.words, self.positions = nn.Embedding(30528, d), nn.Embedding(512, d)
        self.types, self.ln = nn.Embedding(2, d), nn.LayerNorm(d)
        self.layers = nn.ModuleList(_BertLayer(d, heads, ffn) for _ in range(layers))
        self.qa = nn.Linear(d, 2)
        self.drop = nn.Dropout(0.1)

    def forward(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor,
                start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:  # fmt: skip
        positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.words(ids) + self.positions(positions) + self.types(types)
        x = self.drop(self.ln(x))
        ext = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, ext)
        start_logits, end_logits = self.qa(x).split(1, dim=-1)
        loss = F.cross_entropy(start_logits.squeeze(-1).float(), start)
        return (loss + F.cross_entropy(end_logits.squeeze(-1).float(), end)) / 2


def _bert(run: Run) -> Callable[[], None]:
    seq = int(run.option("seq", "384"))
    model = _BertQA().cuda()
    ids = torch.randint(0, 30522, (run.batch, seq), device="cuda")
    types = torch.zeros_like(ids)
    mask = torch.ones_like(ids)
    start = torch.randint(0, seq, (run.batch,), device="cuda")
    end = torch.randint(0, seq, (run.batch,), device="cuda")
    if run.precision == "fp16-o2":  # apex AMP O2: a half model, float32 master weights
        model.half()
        params = [p for p in model.parameters()]
        master = [p.detach().float().requires_grad_() for p in params]
        for m in master:
            m.grad = torch.zeros_like(m)
        opt = torch.optim.Adam(master, lr=1e-5, fused=True)
        scale = 2.0**16

        def step() -> None:
            for p in params:
                p.grad = None
            (model(ids, types, mask, start, end) * scale).backward()
            with torch.no_grad():  # apex's multi_tensor_scale: fp16 grads into fp32, unscaled
                master_grads = [m.grad for m in master]
                torch._foreach_copy_(master_grads, [p.grad for p in params])
                torch._foreach_mul_(master_grads, 1 / scale)
            opt.step()
            with torch.no_grad():
                torch._foreach_copy_(params, master)

        return step
    opt32 = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=False)  # BertAdam: a loop

    def step32() -> None:
        opt32.zero_grad(set_to_none=True)
        model(ids, types, mask, start, end).backward()
        opt32.step()

    return step32


# --- GPT-2 124M ---------------------------------------------------------------------------


class _GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int, math_attention: bool, bias: bool) -> None:
        super().__init__()
        self.heads, self.math = heads, math_attention
        self.ln1, self.ln2 = nn.LayerNorm(d, bias=bias), nn.LayerNorm(d, bias=bias)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=bias), nn.Linear(d, d, bias=bias)
        self.fc, self.fc_out = nn.Linear(d, 4 * d, bias=bias), nn.Linear(4 * d, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.math:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = torch.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
            y = att @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class _GPT(nn.Module):
    def __init__(self, math_attention: bool, bias: bool, layers: int = 12, d: int = 768,
                 heads: int = 12, vocab: int = 50304, block: int = 1024) -> None:  # fmt: skip
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(
            _GPTBlock(d, heads, math_attention, bias) for _ in range(layers)
        )
        self.ln_f = nn.LayerNorm(d, bias=bias)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def _gpt2(run: Run) -> Callable[[], None]:
    seq = int(run.option("seq", "1024"))
    accumulate = int(run.option("accumulate", "1"))
    math_attention = run.option("attention") == "math"
    if run.precision == "tf32":
        torch.set_float32_matmul_precision("high")
    model = _GPT(math_attention, bias=math_attention).cuda()  # llm.c's has biases
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
    idx = torch.randint(0, 50257, (run.batch, seq), device="cuda")
    bf16 = run.precision == "amp-bf16"

    def step() -> None:
        for _ in range(accumulate):
            with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
                loss = model(idx, idx)
            (loss / accumulate).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


# --- Llama decoding -----------------------------------------------------------------------

_LLAMA = {
    "llama-2-7b": dict(dim=4096, layers=32, heads=32, kv_heads=32, ffn=11008, vocab=32000),
    "llama-3-8b": dict(dim=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab=128256),
}


class _RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True) + 1e-5)).type_as(
            x
        ) * self.weight


def _rotary(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    f = freqs.view(1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack(
        [xs[..., 0] * f[..., 0] - xs[..., 1] * f[..., 1],
         xs[..., 1] * f[..., 0] + xs[..., 0] * f[..., 1]], -1,
    ).flatten(3)  # fmt: skip
    return out.type_as(x)


class _LlamaLayer(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, ffn: int, max_seq: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.wqkv = nn.Linear(dim, (heads + 2 * kv_heads) * self.hd, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.w1, self.w3 = nn.Linear(dim, ffn, bias=False), nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)
        self.norm1, self.norm2 = _RMSNorm(dim), _RMSNorm(dim)
        shape = (1, kv_heads, max_seq, self.hd)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=torch.bfloat16))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor, freqs: torch.Tensor, mask: torch.Tensor,
                pos: torch.Tensor) -> torch.Tensor:  # fmt: skip
        b, s, dim = x.shape
        kv = self.kv_heads * self.hd
        q, k, v = self.wqkv(self.norm1(x)).split([dim, kv, kv], dim=-1)
        q = _rotary(q.view(b, s, self.heads, self.hd), freqs)
        k = _rotary(k.view(b, s, self.kv_heads, self.hd), freqs)
        v = v.view(b, s, self.kv_heads, self.hd)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        self.k_cache[:, :, pos] = k
        self.v_cache[:, :, pos] = v
        keys, values = self.k_cache, self.v_cache
        if self.heads != self.kv_heads:
            keys = keys.repeat_interleave(self.heads // self.kv_heads, dim=1)
            values = values.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        h = x + self.wo(y.transpose(1, 2).contiguous().view(b, s, dim))
        hn = self.norm2(h)
        return h + self.w2(F.silu(self.w1(hn)) * self.w3(hn))


class _Llama(nn.Module):
    def __init__(self, name: str, max_seq: int) -> None:
        super().__init__()
        c = _LLAMA[name]
        self.embed = nn.Embedding(c["vocab"], c["dim"])
        self.layers = nn.ModuleList(
            _LlamaLayer(c["dim"], c["heads"], c["kv_heads"], c["ffn"], max_seq)
            for _ in range(c["layers"])
        )
        self.norm, self.output = _RMSNorm(c["dim"]), nn.Linear(c["dim"], c["vocab"], bias=False)
        half = c["dim"] // c["heads"] // 2
        self.register_buffer("freqs", torch.zeros(max_seq, half, 2))
        self.register_buffer("causal", torch.ones(max_seq, max_seq, dtype=torch.bool).tril())

    def forward(self, idx: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        mask = self.causal[None, None, pos]
        freqs = self.freqs[pos]
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, freqs, mask, pos)
        return self.output(self.norm(x)).float()


def _decode(run: Run) -> Callable[[], None]:
    max_seq = 208  # gpt-fast: a 5-token prompt and 200 new tokens, rounded to a multiple of 8
    with torch.device("cuda"):
        model = _Llama(run.option("model", "llama-2-7b"), max_seq).to(torch.bfloat16)
    token = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    position = torch.tensor([100], device="cuda")

    def one_token() -> None:  # gpt-fast's decode_one_token: logits, then sampling
        with torch.no_grad():
            logits = model(token, position)
            probs = torch.softmax(logits[0, -1] / 0.8, dim=-1)
            v, _ = torch.topk(probs, 200)
            probs = torch.where(probs < v[-1], torch.zeros_like(probs), probs)
            token.copy_(torch.multinomial(probs / probs.sum(), 1).view(1, 1))
            position.add_(1).clamp_(max=max_seq - 1)

    return one_token


WORKLOADS: dict[str, Callable[[Run], Callable[[], None]]] = {
    "resnet50-train": lambda run: _resnet(run, train=True),
    "resnet50-infer": lambda run: _resnet(run, train=False),
    "bert-large-squad": _bert,
    "gpt2-train": _gpt2,
    "llama-decode": _decode,
}


def build(run: Run) -> Callable[[], None]:
    """The step function of ``run`` (models and batches made on ``cuda``: call it where
    CUDA is real or simulated).

    Raises:
        ValueError: an unknown workload.
    """
    try:
        make = WORKLOADS[run.workload]
    except KeyError:
        raise ValueError(
            f"unknown workload {run.workload!r}; known: {sorted(WORKLOADS)}."
        ) from None
    if run.precision in ("tf32",):
        torch.backends.cuda.matmul.allow_tf32 = True
    elif run.precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
    return make(run)


def describe(run: Run) -> dict[str, Any]:
    return {"workload": run.workload, "precision": run.precision, "batch": run.batch, **run.options}
