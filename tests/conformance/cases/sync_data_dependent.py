"""Operations whose output size depends on the GPU's data make the host wait (a sync).

GPU: nonzero, masked_select, unique, boolean-mask indexing and torch.where(cond) copy a
count back to the host before they can allocate their output; .item() and printing do
too. Each is a device-to-host synchronisation, which the report lists at its line.
Source: aten/src/ATen/native/cuda/Nonzero.cu (cudaMemcpyAsync of the count + stream sync);
CUDA semantics notes ("Asynchronous execution" — operations that require a sync); these ops
carry the `dynamic_output_shape` tag in native_functions.yaml.
"""

import torch

x = torch.tensor([0.0, 1.5, -2.0, 1.5], device="cuda")
nz = x.nonzero()
sel = torch.masked_select(x, x > 0)
uniq = torch.unique(x)
picked = x[x > 1]
idx = torch.where(x > 0)
assert nz.shape == (3, 1) and sel.tolist() == [1.5, 1.5] and uniq.numel() == 3
assert picked.numel() == 2 and idx[0].tolist() == [1, 3]
torch.cuda.synchronize()

EXPECT = {
    "values": ["real"],
    "syncs": [
        {"kind": "nonzero", "line": "nz = x.nonzero()"},
        {"kind": "masked_select", "line": "sel = torch.masked_select"},
        {"kind": "_unique2", "line": "uniq = torch.unique(x)"},
        {"kind": "nonzero (boolean mask)", "line": "picked = x[x > 1]"},
        {"kind": "nonzero", "line": "idx = torch.where(x > 0)"},
        {"kind": "synchronize", "line": "torch.cuda.synchronize()"},
    ],
}
