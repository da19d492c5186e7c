import torch

state = torch.load("ckpt.pt", map_location="cpu")  # expect: TPL302
safe = torch.load("ckpt.pt", map_location="cpu", weights_only=True)  # near miss
module = torch.jit.load("model.pt")  # near miss: TorchScript, not a pickle
