# near miss: the file asks whether CUDA is there, so it chooses its device
import torch

assert torch.cuda.is_available(), "this benchmark needs an NVIDIA GPU"
model = torch.nn.Linear(2, 2).cuda()
x = torch.randn(2, 2, device="cuda")
