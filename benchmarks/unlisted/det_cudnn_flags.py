"""cuDNN is available with version >= 9000 on a current build; benchmark/deterministic flags are
plain booleans.
"""

import torch

# torch/backends/cudnn/__init__.py: is_available(), version() (an int such as 91002),
# deterministic / benchmark default False, allow_tf32 defaults True; torch 2.13/2.14 CUDA
# wheels ship cuDNN 9.
cd = torch.backends.cudnn
assert cd.is_available() and cd.enabled
assert isinstance(cd.version(), int) and cd.version() >= 90000, cd.version()
assert cd.deterministic is False and cd.benchmark is False
assert cd.allow_tf32 is True
assert torch.backends.cuda.matmul.allow_tf32 is False
assert torch.get_float32_matmul_precision() == "highest"
print("ok")
