"""nn.DataParallel on one GPU moves the module to cuda:0 and CPU inputs with it; a module moved off
afterwards is refused by name.
"""

import torch

# torch/nn/parallel/data_parallel.py DataParallel.__init__: "if len(self.device_ids) == 1:
# self.module.to(self.src_device_obj)"; forward: every parameter/buffer must be on
# src_device_obj, else RuntimeError("module must have its parameters and buffers on device
# {src_device_obj} (device_ids[0]) but found one of them on device: {t.device}"); inputs are
# scattered to device_ids; with one device "return self.module(*inputs[0], **module_kwargs[0])".
lin = torch.nn.Linear(4, 2)
dp = torch.nn.DataParallel(lin)
assert dp.device_ids == [0]
assert lin.weight.device == torch.device("cuda:0")
out = dp(torch.ones(8, 4))
assert out.device == torch.device("cuda:0") and out.shape == (8, 2)
lin.cpu()
try:
    dp(torch.ones(8, 4))
except RuntimeError as e:
    assert str(e) == (
        "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found"
        " one of them on device: cpu"
    ), str(e)
else:
    raise SystemExit("no error")
print("ok")
