"""cuda_t.numpy() raises TypeError telling to call .cpu() first; tolist()/item()/float() work."""

import torch

# torch/csrc/utils/tensor_numpy.cpp tensor_to_numpy: TORCH_CHECK_TYPE(tensor.device().type() ==
# DeviceType::CPU, "can't convert ", tensor.device().str().c_str(), " device type tensor to
# numpy. Use Tensor.cpu() to copy the tensor to host memory first.") -> TypeError.
g = torch.tensor([1.5, 2.5], device="cuda")
try:
    g.numpy()
except TypeError as e:
    assert str(e) == (
        "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor"
        " to host memory first."
    ), str(e)
else:
    raise SystemExit("no error")
assert g.tolist() == [1.5, 2.5]
assert g[1].item() == 2.5 and float(g[0]) == 1.5
assert int(torch.tensor(3, device="cuda")) == 3
assert g.cpu().numpy().tolist() == [1.5, 2.5]
print("ok")
