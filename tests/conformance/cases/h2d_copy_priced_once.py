"""A host-to-device copy is one copy over the host link, priced the same in both value modes.

GPU: x.cuda() / x.to("cuda") of a CPU tensor is a single cudaMemcpyAsync over the host
link; no kernel runs on the device. The simulator prices it with the host link's bandwidth
(torchplace.cost.transfer_seconds) — so torch.cuda.Event.elapsed_time, which returns the
simulator's estimate, must show that copy and nothing else (with the host's time to issue
it: the step-time model queues every operation behind the host), with real values as with
placeholders (the cost model must not care which backing holds the data). With real values
the copy was also priced as an aten._to_copy kernel launch, so every parameter and batch
moved to the GPU cost one launch more than with placeholders (a CNN training step: 18 extra
launches).
Source: CUDA runtime API (cudaMemcpyAsync: a copy engine transfer, no kernel launch);
c10/cuda copy path aten/src/ATen/native/cuda/Copy.cu copy_kernel_cuda (memcpy for
host<->device); torchplace DESIGN.md "One label mechanism, two backings" (accounting and
the cost model must not depend on the backing). Checks the simulator's own estimate, so
the GPU run skips it. Found by tests/test_sim_values.py (real vs placeholder estimates).
"""

import torch

from torchplace import catalog
from torchplace.cost import Peaks, transfer_seconds

x = torch.ones(1024, 1024)  # 4 MiB on the host
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
y = x.cuda()
end.record()
h100 = Peaks.from_spec(catalog.lookup("H100"))
# the copy over the host link, after the host's time to issue it (the GPU was idle)
issue = h100.timing.host_seconds if h100.timing is not None else 0.0
expected_ms = (transfer_seconds(x.nbytes, h100, "h2d") + issue) * 1e3
assert abs(start.elapsed_time(end) - expected_ms) < 1e-9, (start.elapsed_time(end), expected_ms)
assert y.is_cuda

EXPECT = {"sim_only": True, "transfers": {"h2d": {"count": 1, "bytes": 4194304}}}
