"""torch.load of a file saved on a GPU puts its tensors back on the GPUs they were saved on.

GPU (2 GPUs): without map_location the model's weights land on cuda:0 and "extra" on cuda:1
(copied from the file: host-to-device transfers, accounted on each GPU); map_location="cpu"
keeps everything on the host; map_location="cuda:1" puts everything on cuda:1.
Source: torch/serialization.py (default_restore_location -> _cuda_deserialize for "cuda:N"
tags; _get_restore_location for map_location). data/gpu_saved.pt is written by
data/make_gpu_checkpoint.py, tagged as torch.save tags CUDA storages.
"""

from pathlib import Path

import torch

path = Path(__file__).parent.parent / "data" / "gpu_saved.pt"
ckpt = torch.load(path)
assert ckpt["model"]["weight"].device == torch.device("cuda", 0)
assert ckpt["extra"].device == torch.device("cuda", 1) and ckpt["step"] == 5
assert torch.cuda.memory_allocated(1) == 512  # 24 bytes, one 512-byte block
host = torch.load(path, map_location="cpu")
assert host["model"]["weight"].device.type == "cpu"
assert host["extra"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
moved = torch.load(path, map_location="cuda:1")
assert moved["model"]["bias"].device == torch.device("cuda", 1)
model = torch.nn.Linear(4, 3).cuda()
model.load_state_dict(ckpt["model"])
assert model.weight.is_cuda

# 3 storages per load that lands on a GPU (2 loads), then the Linear's weight and bias
EXPECT = {"gpus": 2, "transfers": {"h2d": {"count": 8}}}
