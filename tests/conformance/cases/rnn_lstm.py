"""nn.LSTM on CUDA: construction, flatten_parameters(), a training step and the hidden
state's device.

GPU: LSTM(...).cuda() packs its weights into one cuDNN buffer (flatten_parameters, called by
_apply and again by the user as the RNN warning recommends) and trains; outputs and (h, c) are
on cuda:0. On the CUDA build without a driver the simulator called
torch._cudnn_rnn_flatten_weight on its backing tensors and raised NotImplementedError (found by
tests/programs word_language_model.py and packed_sequence.py); the CPU build never takes that
path (cudnn.is_acceptable is False there).
Source: torch/nn/modules/rnn.py RNNBase.flatten_parameters and _apply;
aten/src/ATen/native/cudnn/RNN.cpp _cudnn_rnn_flatten_weight.
"""

import torch

torch.manual_seed(0)
lstm = torch.nn.LSTM(8, 16, num_layers=2).cuda()
lstm.flatten_parameters()
head = torch.nn.Linear(16, 1).cuda()
opt = torch.optim.SGD([*lstm.parameters(), *head.parameters()], lr=0.1)
x, y = torch.randn(5, 4, 8, device="cuda"), torch.randn(4, 1, device="cuda")
losses = []
for _ in range(5):
    out, (h, c) = lstm(x)
    loss = torch.nn.functional.mse_loss(head(out[-1]), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
assert out.shape == (5, 4, 16) and out.is_cuda and h.is_cuda and c.shape == (2, 4, 16)
assert lstm.weight_ih_l0.grad.is_cuda
assert losses[-1] < losses[0], losses

EXPECT = {"values": ["real"]}
