"""Pattern of variable-length sequence classification with ``pack_padded_sequence`` (the
PyTorch docs' and tutorials' GRU/LSTM classifiers); written for this corpus.

Sequences padded with ``pad_sequence(batch_first=True)``; their lengths stay a CPU int64
tensor, as ``pack_padded_sequence`` requires (``lengths.cpu()``); ``enforce_sorted=False``;
the last hidden state classifies; ``pad_packed_sequence`` unpacks for a per-step check.
GPU: the loss falls; the unpacked output has the longest length and zeros past each end.
"""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

device = "cuda"
torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
lengths = torch.randint(3, 12, (32,), generator=g)
seqs = [torch.randn(int(n), 6, generator=g) for n in lengths]
labels = torch.tensor([int(s[:, 0].sum() > 0) for s in seqs])


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(6, 16, batch_first=True)
        self.out = nn.Linear(16, 2)

    def forward(self, padded, lengths):
        packed = pack_padded_sequence(padded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, _) = self.rnn(packed)
        return self.out(h[-1]), out


model = Classifier().to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
padded, y = pad_sequence(seqs, batch_first=True).to(device), labels.to(device)
losses = []
for _ in range(30):
    opt.zero_grad()
    logits, packed_out = model(padded, lengths)
    loss = nn.functional.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    losses.append(loss.item())

unpacked, out_lengths = pad_packed_sequence(packed_out, batch_first=True)
assert unpacked.is_cuda and unpacked.shape[:2] == (32, int(lengths.max()))
assert torch.equal(out_lengths, lengths) and out_lengths.device.type == "cpu"
i = int(lengths.argmin())
assert unpacked[i, int(lengths[i]) :].abs().sum().item() == 0
assert losses[-1] < losses[0] * 0.8, losses

EXPECT = {"heavy": True, "values": ["real"]}
