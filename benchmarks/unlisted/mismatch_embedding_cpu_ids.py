"""A CUDA nn.Embedding given CPU token ids raises the same-device RuntimeError."""

import torch

# aten/src/ATen/native/Embedding.cpp embedding -> weight.index_select(0, indices); the CUDA
# index_select's codegen device check raises "Expected all tensors to be on the same device".
emb = torch.nn.Embedding(100, 8).cuda()
try:
    emb(torch.tensor([1, 2, 3]))
except RuntimeError as e:
    assert "Expected all tensors to be on the same device" in str(e), str(e)
else:
    raise SystemExit("no error")
print("ok")
