"""torch.as_tensor(ndarray, device="cuda") copies (keeping numpy's dtype); later numpy edits don't
show.
"""

import numpy as np
import torch

# _torch_docs.py as_tensor: "If data is a NumPy array ... and device is not the CPU, it is
# copied"; the dtype is inferred from the array (int64 / float64 stay as they are).
a = np.arange(4)
t = torch.as_tensor(a, device="cuda")
assert t.dtype == torch.int64 and t.device == torch.device("cuda:0")
a[0] = 100
assert t[0].item() == 0
f = torch.as_tensor(np.ones(2), device="cuda")
assert f.dtype == torch.float64
g = torch.from_numpy(np.ones(2, dtype=np.float32)).cuda()
assert g.dtype == torch.float32 and g.is_cuda
print("ok")
