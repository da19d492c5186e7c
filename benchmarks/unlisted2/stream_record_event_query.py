"""An idle stream's query() is True; Stream.record_event() returns a recorded torch.cuda.Event."""

import torch

# torch/cuda/streams.py: Stream.query ("Check if all the work submitted has been completed",
# cudaStreamQuery), Stream.record_event ("If not given, a new one will be allocated. Returns:
# Recorded event."), Stream.wait_stream (records an event on the other stream and waits on it),
# Event.synchronize / query (cudaEventSynchronize / cudaEventQuery).
s = torch.cuda.Stream()
assert s.query() is True
with torch.cuda.stream(s):
    x = torch.ones(1000, device="cuda") + 1
e = s.record_event()
assert isinstance(e, torch.cuda.Event)
e.synchronize()
assert e.query() is True
torch.cuda.current_stream().wait_stream(s)
torch.cuda.current_stream().wait_event(e)
assert x.sum().item() == 2000.0
torch.cuda.synchronize()
assert s.query() and torch.cuda.current_stream().query()
print("ok")
