"""torch.save of a CUDA tensor records its device; torch.load puts it back there.

GPU: torch.save({"w": t}) with t on cuda:1 stores the location tag "cuda:1"; torch.load
without map_location restores the tensor on cuda:1 with its values; map_location="cpu"
loads it on the CPU; map_location="cuda:0" on cuda:0. A module's state_dict saved on the GPU
loads back onto the GPU the same way (the classic "checkpoint saved on GPU" behaviour).
Source: torch/serialization.py (location_tag / _backend_tag: "cuda:<index>" for a CUDA
storage; default_restore_location, _deserialize); docs "Saving and loading models across
devices". Found by skorch's test_pickle_save_and_load_mixed_devices under pytest --sim-gpu.
"""

import io

import torch

t = torch.arange(4.0, device="cuda:1")
buf = io.BytesIO()
torch.save({"w": t}, buf)

buf.seek(0)
back = torch.load(buf)["w"]
assert back.device == torch.device("cuda", 1), back.device
assert back.tolist() == [0.0, 1.0, 2.0, 3.0]

buf.seek(0)
assert torch.load(buf, map_location="cpu")["w"].device == torch.device("cpu")
buf.seek(0)
on0 = torch.load(buf, map_location="cuda:0")["w"]
assert on0.device == torch.device("cuda", 0) and on0.tolist() == [0.0, 1.0, 2.0, 3.0]

EXPECT = {"gpus": 2, "values": ["real"]}
