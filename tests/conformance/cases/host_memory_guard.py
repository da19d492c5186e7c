"""A script that builds a huge tensor on the host is stopped before the machine runs out.

GPU machine: `torch.empty(...)` without device= allocates host RAM, on a GPU machine too;
too much of it gets the process killed by the OOM killer. Under simulation the simulator
stops first, with HostMemoryError naming the line and the fix (build on the device).
Source: this project's rule (issue 8 §3: "stop before the machine runs out of host memory
with a clear error"); torch allocates CPU tensors with malloc (c10/core/CPUAllocator.cpp).
"""

import torch

weights = torch.empty(4096 * 1024**3 // 4)  # 4 TiB on the host

EXPECT = {
    "sim_only": True,
    "exit": 1,
    "error": {
        "type": "HostMemoryError",
        "message": r"torchplace sim: the script makes a 4\.00 TiB tensor on the host.*with torch\.device\('cuda'\).*",
        "line": "weights = torch.empty(",
    },
}
