"""Write gpu_saved.pt: a checkpoint as torch.save writes it on a 2-GPU machine.

A real GPU run tags each storage with its device ("cuda:0", "cuda:1") through
torch.serialization's tagger for CUDA storages (_cuda_tag). Without a GPU the same file is
produced by tagging host storages the same way; the data bytes are identical because
torch.save copies a CUDA storage to the host before writing it. The conformance cases load
this file to check what torch.load does with GPU-saved tensors.

Run: python tests/conformance/data/make_gpu_checkpoint.py
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.serialization as ser

DEVICES = {}  # storage key -> the device it was "saved on"


def tag(storage: object) -> str | None:
    return DEVICES.get(getattr(storage, "_cdata", None))


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    extra = torch.arange(6.0)
    state = {"model": model.state_dict(), "extra": extra, "step": 5}
    for t in model.state_dict().values():
        DEVICES[t.untyped_storage()._cdata] = "cuda:0"
    DEVICES[extra.untyped_storage()._cdata] = "cuda:1"
    ser.register_package(1, tag, lambda storage, location: None)
    torch.save(state, Path(__file__).with_name("gpu_saved.pt"))


if __name__ == "__main__":
    main()
