"""Pattern of transformers causal-LM training with ``model.gradient_checkpointing_enable()``
and a bfloat16 model (the docs' "Methods and tools for efficient training on a single GPU");
written for this corpus, random weights.

A Llama built from a config on ``with torch.device("cuda"):`` (meta-free construction on the
GPU), ``gradient_checkpointing_enable()`` with ``use_reentrant=False``, ``model.config.use_cache
= False``, gradient accumulation over 2 micro-batches, ``clip_grad_norm_`` and ``torch.optim.AdamW``
(its CUDA default: the foreach implementation).
GPU: the loss falls, and peak memory is below the same run without checkpointing.
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=128,
)
peaks, losses = {}, {}
for checkpointing in (False, True):
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.randint(0, 128, (16,)).repeat(2 * 8 * 8)[: 2 * 8 * 64].view(2, 8, 64)
    torch.cuda.reset_peak_memory_stats()
    losses[checkpointing] = []
    for _ in range(6):
        for micro in data:
            micro = micro.to("cuda")
            loss = model(input_ids=micro, labels=micro).loss / len(data)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses[checkpointing].append(loss.item())
    peaks[checkpointing] = torch.cuda.max_memory_allocated()
    del model, optimizer
    print(checkpointing, losses[checkpointing], peaks[checkpointing])

assert losses[True][-1] < losses[True][0], losses
assert peaks[True] < peaks[False], peaks

EXPECT = {"heavy": True, "values": ["real"]}
