"""Pattern of transformers generation with a Llama decoder in bfloat16 (the model cards'
``model.generate`` and a manual decoding loop over ``past_key_values``); written for this
corpus, random weights.

``LlamaForCausalLM(LlamaConfig(...), )`` built in bfloat16 with ``torch_dtype``-like
``.to(device, torch.bfloat16)``; a ``DynamicCache`` filled by a prefill then one token at a
time with ``cache_position``; then ``generate()`` with a ``StaticCache``
(``cache_implementation="static"``) as used for torch.compile.
GPU: both decodings agree with greedy ``generate()``; the cache's keys are on cuda in bf16.
"""

import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

device = "cuda"
torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
model = LlamaForCausalLM(config).to(device, torch.bfloat16).eval()
prompt = torch.randint(0, 128, (1, 7), device=device)
greedy = model.generate(prompt, max_new_tokens=6, do_sample=False)
static = model.generate(prompt, max_new_tokens=6, do_sample=False, cache_implementation="static")

cache = DynamicCache(config=config)
ids = prompt
with torch.no_grad():
    out = model(ids, past_key_values=cache, use_cache=True)
    for _ in range(6):
        next_id = out.logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_id], dim=1)
        position = torch.tensor([ids.shape[1] - 1], device=device)
        out = model(next_id, past_key_values=out.past_key_values, cache_position=position)

assert greedy.shape == (1, 13) and greedy.is_cuda
assert torch.equal(ids, greedy), (ids, greedy)
assert torch.equal(static, greedy), (static, greedy)
assert cache.get_seq_length() == 13  # the prompt and six fed-back tokens
assert torch.cuda.max_memory_allocated() > 0

EXPECT = {"heavy": True, "values": ["real"]}
