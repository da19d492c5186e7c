"""Pattern of the PyTorch DDP tutorial series, multigpu_torchrun.py; written for this corpus.

Started by ``torchrun --nproc_per_node=2``: the rank comes from ``LOCAL_RANK``,
``init_process_group(backend="nccl")`` reads the rendezvous from the environment, a Trainer
class wraps the model in ``DDP(model, device_ids=[gpu_id])`` and saves a snapshot dict
``{"MODEL_STATE": ..., "EPOCHS_RUN": ...}`` from rank 0.
GPU (torchrun, 2 GPUs): every rank trains on cuda:LOCAL_RANK and the loss falls.
"""

import os
import tempfile

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, loader, optimizer, snapshot_path: str) -> None:
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = DDP(model.to(self.gpu_id), device_ids=[self.gpu_id])
        self.loader, self.optimizer, self.snapshot_path = loader, optimizer, snapshot_path
        self.losses: list[float] = []

    def _run_epoch(self, epoch: int) -> None:
        self.loader.sampler.set_epoch(epoch)
        for source, targets in self.loader:
            source, targets = source.to(self.gpu_id), targets.to(self.gpu_id)
            self.optimizer.zero_grad()
            loss = F.mse_loss(self.model(source), targets)
            loss.backward()
            self.optimizer.step()
        self.losses.append(loss.item())

    def train(self, max_epochs: int) -> None:
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0:
                snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}
                torch.save(snapshot, self.snapshot_path)


init_process_group(backend="nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
torch.manual_seed(0)
x = torch.rand(512, 20)
dataset = TensorDataset(x, x.sum(dim=1, keepdim=True))
model = torch.nn.Linear(20, 1)
loader = DataLoader(
    dataset, batch_size=32, pin_memory=True, shuffle=False, sampler=DistributedSampler(dataset)
)
trainer = Trainer(
    model,
    loader,
    torch.optim.SGD(model.parameters(), lr=1e-2),
    os.path.join(tempfile.gettempdir(), "snapshot.pt"),
)
trainer.train(4)
assert trainer.losses[-1] < trainer.losses[0], trainer.losses
assert next(trainer.model.parameters()).device == torch.device(
    "cuda", int(os.environ["LOCAL_RANK"])
)
destroy_process_group()

EXPECT = {
    "options": ["--nproc-per-node", "2"],
    "values": ["real"],  # every rank runs, over gloo: the loss is the training's own
}
