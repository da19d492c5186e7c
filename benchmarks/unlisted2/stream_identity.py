"""Streams compare and hash by handle and device; a new stream is not the default; reprs;
torch.Stream base.
"""

import torch

# torch/cuda/streams.py: Stream.__eq__ (same underlying c10 stream), __hash__ =
# hash((self.cuda_stream, self.device)), __repr__ "<torch.cuda.Stream device={device}
# cuda_stream={cuda_stream:#x}>"; class Stream(torch._C._CudaStreamBase) whose base is
# torch.Stream (torch/_C/__init__.pyi "class _CudaStreamBase(Stream)"); the default stream is
# the legacy NULL stream, handle 0 (c10/cuda/CUDAStream.cpp).
a = torch.cuda.current_stream()
b = torch.cuda.current_stream()
assert a == b and hash(a) == hash(b)
assert {a: 1}[b] == 1
s = torch.cuda.Stream()
assert s != a and s.cuda_stream != 0
assert s.device == torch.device("cuda:0")
assert isinstance(s, torch.Stream) and isinstance(a, torch.cuda.Stream)
assert repr(torch.cuda.default_stream()) == "<torch.cuda.Stream device=cuda:0 cuda_stream=0x0>", (
    repr(torch.cuda.default_stream())
)
assert repr(s) == f"<torch.cuda.Stream device=cuda:0 cuda_stream={s.cuda_stream:#x}>"
assert s != "not a stream"
print("ok")
