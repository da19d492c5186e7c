"""pack_padded_sequence with the lengths on the GPU: the CPU-only lengths error.

GPU: nn.utils.rnn.pack_padded_sequence(x, lengths) with lengths a CUDA int64 tensor raises
RuntimeError "'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long
tensor" (the lengths must be on the CPU; move them with lengths.cpu() or pass a list).
Source: aten/src/ATen/native/PackedSequence.cpp checkLongTensor; pytorch/pytorch#43227
(closed as by design: "the second argument, 'lengths', must be a CPU tensor"), and the
same error in pytorch/tutorials#1300 (chatbot tutorial).
"""

import torch
from torch.nn.utils.rnn import pack_padded_sequence

x = torch.randn(2, 3, 4, device="cuda")
lengths = torch.tensor([3, 2], device="cuda")
packed = pack_padded_sequence(x, lengths, batch_first=True)

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"^'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor$",
        "line": 16,
    },
}
