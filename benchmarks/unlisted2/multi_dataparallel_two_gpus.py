"""nn.DataParallel over two GPUs splits the batch, gathers the output on cuda:0, and grads land on
cuda:0.
"""
# gpus: 2

import torch

# torch/nn/parallel/data_parallel.py: device_ids defaults to all devices; forward scatters the
# inputs along dim 0, replicates the module, runs parallel_apply and gathers to output_device
# (device_ids[0]); gradients of the replicas are reduced back into the original parameters
# (Broadcast backward = ReduceAddCoalesced) on device_ids[0].
m = torch.nn.Linear(4, 2).cuda()
dp = torch.nn.DataParallel(m)
assert dp.device_ids == [0, 1] and dp.output_device == 0
x = torch.ones(8, 4, device="cuda")
out = dp(x)
assert out.device == torch.device("cuda:0") and out.shape == (8, 2)
assert torch.allclose(out, m(x))
out.sum().backward()
assert m.weight.grad.device == torch.device("cuda:0")
assert torch.allclose(m.weight.grad, torch.full((2, 4), 8.0, device="cuda"))
print("ok")
