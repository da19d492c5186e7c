"""Pattern of transformers ``Trainer`` fine-tuning (run_glue.py / the course's Trainer
chapter) on a tiny in-memory dataset; written for this corpus, random weights.

``TrainingArguments`` with ``per_device_train_batch_size``, ``eval_strategy="epoch"``,
``save_strategy="no"``, ``report_to=[]``; the Trainer finds the GPU itself (accelerate),
moves the model and every batch, and runs evaluation with ``compute_metrics``.
GPU: ``trainer.args.device`` is cuda:0, the model is on it, the training loss falls and the
evaluation accuracy is reported.
"""

import tempfile

import numpy as np
import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

torch.manual_seed(0)


class Toy(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 2, (n,), generator=g)
        self.ids = torch.randint(10, 50, (n, 12), generator=g) + 50 * self.labels[:, None]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(12, dtype=torch.long),
            "labels": self.labels[i],
        }


def compute_metrics(eval_pred) -> dict[str, float]:
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


config = BertConfig(
    vocab_size=100,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=32,
    num_labels=2,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
model = BertForSequenceClassification(config)
args = TrainingArguments(
    output_dir=tempfile.mkdtemp(),
    per_device_train_batch_size=16,
    per_device_eval_batch_size=32,
    num_train_epochs=8,
    learning_rate=1e-3,
    eval_strategy="epoch",
    save_strategy="no",
    logging_steps=2,
    report_to=[],
    seed=0,
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=Toy(96, 0),
    eval_dataset=Toy(32, 1),
    compute_metrics=compute_metrics,
)
result = trainer.train()
metrics = trainer.evaluate()
print(result, metrics)
losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
assert trainer.args.device == torch.device("cuda", 0), trainer.args.device
assert next(model.parameters()).is_cuda
assert losses[-1] < losses[0], losses
assert metrics["eval_accuracy"] > 0.75, metrics

EXPECT = {"heavy": True, "values": ["real"]}
