"""Pattern of a transformers model card's inference snippet: ``AutoModelForCausalLM
.from_pretrained(path, device_map="auto", dtype=torch.bfloat16)`` (accelerate places the
weights), ``inputs.to(model.device)`` and ``generate()``, then ``device_map=0``; written for
this corpus — the checkpoint is a random-weight Llama saved with ``save_pretrained`` first, as
nothing may be downloaded. Both device maps name the GPU by ordinal (``{"": 0}``).

GPU: every weight is on cuda:0 (in bf16 for the first); the generated ids continue the prompt.
"""

import tempfile

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
)  # fmt: skip
path = tempfile.mkdtemp()
LlamaForCausalLM(config).save_pretrained(path)

model = AutoModelForCausalLM.from_pretrained(path, device_map="auto", dtype=torch.bfloat16)
assert all(
    p.device == torch.device("cuda", 0) and p.dtype == torch.bfloat16 for p in model.parameters()
)
prompt = torch.randint(0, 128, (1, 5))
inputs = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt)}
inputs = {k: v.to(model.device) for k, v in inputs.items()}
out = model.generate(**inputs, max_new_tokens=6, do_sample=False)
assert out.shape == (1, 11) and torch.equal(out[:, :5].cpu(), prompt)

on_gpu = AutoModelForCausalLM.from_pretrained(path, device_map=0)
assert next(on_gpu.parameters()).device == torch.device("cuda", 0)
assert torch.cuda.max_memory_allocated() > 0

EXPECT = {"heavy": True, "values": ["real"]}
