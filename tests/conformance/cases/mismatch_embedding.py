"""An embedding on the GPU looked up with CPU token ids raises, naming index_select.

GPU: "Expected all tensors to be on the same device, but got index is on cpu, different
from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)".
Source: aten/src/ATen/native/Embedding.cpp (embedding = weight.index_select(0, indices));
message quoted verbatim in an issue thread on bitsandbytes + CLaRa (index_select).
"""

import torch

emb = torch.nn.Embedding(10, 4).to("cuda")
vectors = emb(torch.tensor([[1, 2, 3]]))

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 \(when checking argument in method wrapper_CUDA__index_select\)",
        "line": 12,
    },
}
