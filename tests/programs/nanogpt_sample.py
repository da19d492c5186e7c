"""Pattern of karpathy/nanoGPT sample.py; written for this corpus.

Loads a checkpoint dict (``torch.load(ckpt_path, map_location=device)``), strips the
``_orig_mod.`` prefix torch.compile leaves in state dict keys, builds the model in eval mode,
encodes a start prompt on the host, moves it with ``torch.tensor(..., device=device)[None,
...]`` and samples ``num_samples`` continuations with temperature and top-k under autocast.
The checkpoint is written first by a short run (nanoGPT's ``init_from='resume'``).
GPU: every sample has the prompt plus max_new_tokens tokens, all in the vocabulary.
"""

import os
import tempfile
from contextlib import nullcontext

import torch
from _nanogpt_model import GPT, GPTConfig

device = "cuda"
num_samples, max_new_tokens, temperature, top_k = 2, 20, 0.8, 10
seed = 1337
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
ckpt_path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")

# a checkpoint as train.py saves it, with compiled-model keys
args = {"block_size": 32, "vocab_size": 65, "n_layer": 2, "n_head": 2, "n_embd": 32}
trained = GPT(GPTConfig(**args)).to(device)
state = {f"_orig_mod.{k}": v for k, v in trained.state_dict().items()}
torch.save({"model": state, "model_args": args, "iter_num": 0}, ckpt_path)

torch.manual_seed(seed)
torch.cuda.manual_seed(seed)
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type, dtype=ptdtype)

checkpoint = torch.load(ckpt_path, map_location=device)
model = GPT(GPTConfig(**checkpoint["model_args"]))
state_dict = checkpoint["model"]
for k in list(state_dict):
    if k.startswith("_orig_mod."):
        state_dict[k[len("_orig_mod.") :]] = state_dict.pop(k)
model.load_state_dict(state_dict)
model.eval()
model.to(device)

chars = [chr(c) for c in range(32, 97)]
stoi = {ch: i for i, ch in enumerate(chars)}
start = "HELLO "
start_ids = [stoi[c] for c in start]
x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...]
samples = []
with torch.no_grad(), ctx:
    for _ in range(num_samples):
        y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k)
        samples.append("".join(chars[i] for i in y[0].tolist()))
        print(samples[-1])
        print("---------------")

assert all(len(s) == len(start) + max_new_tokens and s.startswith(start) for s in samples)
assert y.is_cuda and y.dtype == torch.long and int(y.max()) < 65

EXPECT = {"values": ["real"]}
