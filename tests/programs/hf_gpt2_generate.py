"""Pattern of transformers text generation with GPT-2 (the docs' "Text generation"
guide); written for this corpus, random weights.

``model.generate(**inputs, ...)`` on cuda: greedy, then sampling with ``top_k``/``top_p`` and
a seeded generator, then beam search with ``num_beams``, each through the KV cache
(``use_cache=True``, the default); the prompt batch is left-padded with an attention mask.
GPU: each output has the prompt plus ``max_new_tokens`` tokens; greedy decoding through the
cache gives the same tokens as a cache-free argmax loop.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

device = "cuda"
torch.manual_seed(0)
config = GPT2Config(
    n_layer=2,
    n_head=4,
    n_embd=64,
    vocab_size=128,
    n_positions=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=None,
)
model = GPT2LMHeadModel(config).to(device).eval()
input_ids = torch.randint(1, 128, (2, 6), device=device)
attention_mask = torch.ones_like(input_ids)
input_ids[1, :2], attention_mask[1, :2] = 0, 0  # left padding
inputs = {"input_ids": input_ids, "attention_mask": attention_mask}

greedy = model.generate(**inputs, max_new_tokens=8, do_sample=False)
sampled = model.generate(**inputs, max_new_tokens=8, do_sample=True, top_k=20, top_p=0.9)
beams = model.generate(**inputs, max_new_tokens=8, num_beams=3, early_stopping=True)
for out in (greedy, sampled, beams):
    assert out.is_cuda and out.shape == (2, 14), out.shape

# the unpadded row, decoded without the cache
ids = input_ids[:1]
with torch.no_grad():
    for _ in range(8):
        next_id = model(ids, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_id], dim=1)
assert torch.equal(ids, greedy[:1]), (ids, greedy[:1])

EXPECT = {"values": ["real"]}
