"""Pattern of a transformers causal-LM fine-tuning loop (the course's "training loop in
native PyTorch" and run_clm_no_trainer.py); written for this corpus, random weights.

``GPT2LMHeadModel(GPT2Config(...))`` moved with ``model.to(device)``; batches as dicts of
``input_ids``/``attention_mask``/``labels`` moved with ``{k: v.to(device) ...}``; padding
labelled -100; ``outputs.loss.backward()``; torch AdamW with ``get_scheduler("linear")``;
bf16 autocast; evaluation perplexity from the mean loss.
GPU: the loss falls; the logits are (batch, seq, vocab) on cuda.
"""

import math

import torch
from transformers import GPT2Config, GPT2LMHeadModel, get_scheduler

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=256, n_positions=64)
model = GPT2LMHeadModel(config).to(device)

g = torch.Generator().manual_seed(0)
text = torch.randint(0, 256, (40,), generator=g).repeat(26)  # a repeating corpus: learnable
batches = []
for i in range(0, 4 * 8 * 32, 4 * 32):
    input_ids = text[i : i + 4 * 32].view(4, 32)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, -5:] = 0  # one padded row
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    batches.append({"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels})

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
num_steps = 3 * len(batches)
lr_scheduler = get_scheduler(
    "linear", optimizer=optimizer, num_warmup_steps=2, num_training_steps=num_steps
)
losses = []
model.train()
for _ in range(3):
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            outputs = model(**batch)
        outputs.loss.backward()
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
        losses.append(outputs.loss.item())

model.eval()
with torch.no_grad():
    batch = {k: v.to(device) for k, v in batches[0].items()}
    out = model(**batch)
print(f"perplexity: {math.exp(out.loss.item()):.2f}")
assert out.logits.shape == (4, 32, 256) and out.logits.is_cuda
assert sum(losses[-4:]) < sum(losses[:4]), losses

EXPECT = {"heavy": True, "values": ["real"]}
