"""Pattern of pytorch/examples word_language_model/main.py (the LSTM model); written here.

A corpus tokenised on the host and ``batchify``-ed with ``data.view(bsz, -1).t().contiguous()
.to(device)``; ``get_batch`` slices bptt rows; the hidden state from ``model.init_hidden(bsz)``
(``weight.new_zeros``) is detached every batch by ``repackage_hidden``; gradients clipped with
``clip_grad_norm_`` and applied by hand with ``p.data.add_(p.grad, alpha=-lr)``; evaluation
sums ``len(data) * criterion(...).item()``; the learning rate is divided by 4 when the
validation loss stops improving.
GPU: the validation loss falls.
"""

import math

import torch
from torch import nn

device = torch.device("cuda")
torch.manual_seed(1111)


class RNNModel(nn.Module):
    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, inp, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(inp)), hidden)
        return torch.log_softmax(self.decoder(self.drop(output)), dim=-1), hidden

    def init_hidden(self, bsz: int):
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )


words = ("the cat sat on the mat and the dog ate the bone while the bird sang " * 60).split()
vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
ids = torch.tensor([vocab[w] for w in words], dtype=torch.long)
split = int(0.8 * len(ids))


def batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous().to(device)


train_data, val_data = batchify(ids[:split], 8), batchify(ids[split:], 4)
bptt, clip = 12, 0.25


def get_batch(source: torch.Tensor, i: int):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].view(-1)


def repackage_hidden(h):
    return h.detach() if isinstance(h, torch.Tensor) else tuple(repackage_hidden(v) for v in h)


model = RNNModel(len(vocab), 32, 32, 2).to(device)
criterion = nn.NLLLoss()


def evaluate(source: torch.Tensor) -> float:
    model.eval()
    total_loss, hidden = 0.0, model.init_hidden(4)
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, bptt):
            data, targets = get_batch(source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output.view(-1, len(vocab)), targets).item()
    return total_loss / (len(source) - 1)


lr, best_val_loss, val_losses = 5.0, None, [evaluate(val_data)]
for epoch in range(1, 4):
    model.train()
    hidden = model.init_hidden(8)
    for i in range(0, train_data.size(0) - 1, bptt):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, len(vocab)), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    val_losses.append(evaluate(val_data))
    print(
        f"| end of epoch {epoch} | valid loss {val_losses[-1]:5.2f} | valid ppl {math.exp(val_losses[-1]):8.2f}"
    )
    if best_val_loss is None or val_losses[-1] < best_val_loss:
        best_val_loss = val_losses[-1]
    else:
        lr /= 4.0

assert val_losses[-1] < val_losses[0], val_losses

EXPECT = {"heavy": True, "values": ["real"]}
