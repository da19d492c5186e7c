"""Streams have identity and a device; events time GPU work.

GPU: current_stream() == default_stream() outside any stream context; a new Stream differs
and becomes current inside `with torch.cuda.stream(s)`; s.device is the stream's device;
Event(enable_timing=True).elapsed_time() gives non-negative milliseconds after both events
are recorded and synchronised.
Source: torch/cuda/streams.py, torch/cuda/__init__.py (current_stream, stream, StreamContext).
"""

import torch

assert torch.cuda.current_stream() == torch.cuda.default_stream()
s = torch.cuda.Stream()
assert s != torch.cuda.default_stream() and s.device == torch.device("cuda", 0)
with torch.cuda.stream(s):
    assert torch.cuda.current_stream() == s
    y = torch.randn(512, 512, device="cuda") @ torch.randn(512, 512, device="cuda")
assert torch.cuda.current_stream() == torch.cuda.default_stream()
torch.cuda.current_stream().wait_stream(s)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
z = y @ y
end.record()
end.synchronize()
assert start.elapsed_time(end) >= 0.0
s.synchronize()

EXPECT = {}
