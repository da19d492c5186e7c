import torch
from torch.cuda.amp import autocast

with torch.cuda.amp.autocast():  # expect: TPL402
    pass
scaler = torch.cuda.amp.GradScaler(init_scale=1024)  # expect: TPL402
with autocast(dtype=torch.bfloat16):  # expect: TPL402
    pass
with torch.amp.autocast("cuda"):  # near miss: the new API
    pass
new_scaler = torch.amp.GradScaler("cuda")  # near miss


@torch.cuda.amp.custom_fwd  # expect: TPL402
def forward(ctx, x):
    return x
