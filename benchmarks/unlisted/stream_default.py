"""The default stream is the current one at start; its raw handle is 0 and its stream_id 0."""

import torch

# c10/cuda/CUDAStream.cpp: the default stream is the legacy NULL stream (cudaStream_t 0),
# StreamId 0; current stream defaults to it; torch/cuda/streams.py Stream.__eq__ compares
# the underlying c10 stream.
d = torch.cuda.default_stream()
assert torch.cuda.current_stream() == d
assert d.cuda_stream == 0, d.cuda_stream
assert d.stream_id == 0, d.stream_id
assert d.device == torch.device("cuda:0")
print("ok")
