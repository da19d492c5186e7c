"""pack_padded_sequence packs a CUDA input with CPU lengths; its batch_sizes stay on the CPU.

GPU: torch.nn.utils.rnn.pack_padded_sequence(x, lengths) with x on cuda:0 and lengths a CPU
int64 tensor (the only place lengths may be) returns a PackedSequence whose data is on
cuda:0 and whose batch_sizes is a CPU int64 tensor; pad_packed_sequence gives the padded
CUDA tensor back with CPU lengths. No device error is raised.
Source: aten/src/ATen/native/PackedSequence.cpp (_pack_padded_sequence: "`data` can be on
arbitrary device and of arbitrary dtype, but `batch_sizes` must be a CPU int64 tensor";
checkLongTensor requires lengths to be a 1D CPU int64 tensor); torch/nn/utils/rnn.py docs
("lengths ... must be on the CPU if provided as a tensor"). Found by skorch's
tests/test_utils.py (TestToTensor.parameters) under pytest --sim-gpu.
"""

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]], device="cuda")
lengths = torch.tensor([3, 2])
packed = pack_padded_sequence(x, lengths, batch_first=True)
assert packed.data.device == torch.device("cuda", 0), packed.data.device
assert packed.batch_sizes.device == torch.device("cpu"), packed.batch_sizes.device
assert packed.batch_sizes.tolist() == [2, 2, 1]
assert packed.data.tolist() == [1.0, 4.0, 2.0, 5.0, 3.0]
padded, back = pad_packed_sequence(packed, batch_first=True)
assert padded.is_cuda and back.device.type == "cpu" and back.tolist() == [3, 2]
assert torch.equal(padded.cpu(), x.cpu())

EXPECT = {"values": ["real"]}
