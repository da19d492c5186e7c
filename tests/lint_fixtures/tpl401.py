import torch.nn as nn
from torch.nn import DataParallel

m = nn.DataParallel(model)  # expect: TPL401
m2 = DataParallel(model)  # expect: TPL401
out = nn.parallel.data_parallel(model, x)  # expect: TPL401
wrapped = isinstance(m, nn.DataParallel)  # near miss: a check, not a use
ddp = nn.parallel.DistributedDataParallel(model)  # near miss
