import torch

try:
    scaler = torch.amp.GradScaler("cuda")
except (AttributeError, TypeError):
    scaler = torch.cuda.amp.GradScaler()  # near miss: the fallback for torch < 2.3

try:
    from torch.amp import custom_fwd
except ImportError:
    from torch.cuda.amp import custom_fwd  # near miss: the fallback for old torch

autocast = torch.cuda.amp.autocast(dtype=torch.bfloat16)  # expect: TPL402
