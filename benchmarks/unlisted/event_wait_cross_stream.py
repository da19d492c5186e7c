"""A producer stream records an event; the consumer stream waits on it; the result is right."""

import torch

# torch/cuda/streams.py Event.record(stream), Stream.wait_event(event) (cudaStreamWaitEvent).
prod, cons = torch.cuda.Stream(), torch.cuda.Stream()
done = torch.cuda.Event()
with torch.cuda.stream(prod):
    a = torch.full((1000,), 3.0, device="cuda")
    done.record(prod)
cons.wait_event(done)
with torch.cuda.stream(cons):
    b = a * 2
cons.synchronize()
assert b.sum().item() == 6000.0
print("ok")
