"""torch.save/load of a cuda tensor and its view keeps them sharing storage, on cuda:0."""

import io

import torch

# docs/source/notes/serialization.rst "Saving and loading tensors preserves views": tensors that
# share a storage are saved with one storage and share it after loading; torch.load restores
# storages to the device they were saved from (torch/serialization.py default_restore_location).
a = torch.arange(10.0, device="cuda")
b = a[2:5]
buf = io.BytesIO()
torch.save({"a": a, "b": b}, buf)
buf.seek(0)
d = torch.load(buf)
a2, b2 = d["a"], d["b"]
assert a2.device == torch.device("cuda:0") and b2.device == torch.device("cuda:0")
assert b2.untyped_storage().data_ptr() == a2.untyped_storage().data_ptr()
assert b2.storage_offset() == 2
a2[3] = 100.0
assert b2[1].item() == 100.0
assert a[3].item() == 3.0  # the loaded copy is independent of the original
print("ok")
