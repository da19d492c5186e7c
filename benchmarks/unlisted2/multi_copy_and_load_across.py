"""copy_ and load_state_dict work across GPUs and keep the destination's device."""
# gpus: 2

import torch

# aten/src/ATen/native/Copy.cpp / cuda/Copy.cu copy_: device-to-device copies between GPUs are
# supported (peer or staged); torch/nn/modules/module.py _load_from_state_dict copies each
# value into the existing parameter with param.copy_(input_param) under no_grad, so parameters
# keep their device.
a0 = torch.zeros(3, device="cuda:0")
a1 = torch.arange(3.0, device="cuda:1")
a0.copy_(a1)
assert a0.device == torch.device("cuda:0") and a0.tolist() == [0.0, 1.0, 2.0]
src = torch.nn.Linear(3, 2).to("cuda:0")
dst = torch.nn.Linear(3, 2).to("cuda:1")
dst.load_state_dict(src.state_dict())
assert dst.weight.device == torch.device("cuda:1")
assert torch.equal(dst.weight.cpu(), src.weight.cpu())
c = a1.to(a0)  # to(other): other's device
assert c.device == torch.device("cuda:0")
print("ok")
