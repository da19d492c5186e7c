"""Pattern of transformers sequence classification fine-tuning with BERT (the course's
"full training" chapter); written for this corpus, random weights.

``BertForSequenceClassification(BertConfig(..., num_labels=2))``; a padded batch with
``attention_mask`` and ``token_type_ids`` built on the host; a DataLoader over a list of
dicts with a collate function; ``batch = {k: v.to(device) ...}``; AdamW and a linear schedule;
accuracy from ``logits.argmax(-1) == labels`` summed with ``.item()``.
GPU: training accuracy on a separable toy task rises above chance.
"""

import torch
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

device = torch.device("cuda")
torch.manual_seed(0)
config = BertConfig(
    vocab_size=100,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=64,
    num_labels=2,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
model = BertForSequenceClassification(config).to(device)

g = torch.Generator().manual_seed(0)
examples = []
for _ in range(64):
    label = int(torch.randint(0, 2, (1,), generator=g))
    n = int(torch.randint(5, 16, (1,), generator=g))
    ids = torch.randint(10, 50, (n,), generator=g) + 50 * label  # the label shows in the tokens
    examples.append(
        {"input_ids": torch.cat([torch.tensor([1]), ids, torch.tensor([2])]), "label": label}
    )


def collate(batch: list[dict]) -> dict[str, torch.Tensor]:
    width = max(len(e["input_ids"]) for e in batch)
    input_ids = torch.zeros(len(batch), width, dtype=torch.long)
    for i, e in enumerate(batch):
        input_ids[i, : len(e["input_ids"])] = e["input_ids"]
    return {
        "input_ids": input_ids,
        "attention_mask": (input_ids != 0).long(),
        "token_type_ids": torch.zeros_like(input_ids),
        "labels": torch.tensor([e["label"] for e in batch]),
    }


loader = DataLoader(examples, batch_size=16, shuffle=True, collate_fn=collate)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = get_linear_schedule_with_warmup(optimizer, 2, 8 * len(loader))
accuracy = []
for epoch in range(8):
    model.train()
    correct = 0
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        outputs = model(**batch)
        outputs.loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        correct += (outputs.logits.argmax(-1) == batch["labels"]).sum().item()
    accuracy.append(correct / len(examples))
    print(f"epoch {epoch}: train accuracy {accuracy[-1]:.2f}")

assert accuracy[-1] > 0.75, accuracy
assert outputs.logits.is_cuda

EXPECT = {"heavy": True, "values": ["real"]}
