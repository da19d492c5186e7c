"""Damaged checkpoints: one clear error, never wrong data, never a half-done load.

The fast version of ``benchmarks/checkpoint_bitflips.py``: a few hundred byte positions
chosen in every region of the file (local headers and names, data.pkl, tensor data, the
random states' records, data descriptors, central directory, end records, the seal) are
inverted one at a time, and each damaged copy is loaded into fresh objects.
"""

from __future__ import annotations

import io
import math
import random
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from helpers import save_format1
from torchplace.runner import load, save


def _objects(seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0 + seed)
    return {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler}


def _trained() -> dict[str, Any]:
    objects = _objects(0)
    for _ in range(2):
        objects["model"](torch.randn(8, 4)).square().mean().backward()
        objects["optimizer"].step()
        objects["optimizer"].zero_grad()
        objects["scheduler"].step()
    return objects


def _copy(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_copy(v) for v in x)
    return x


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and (a.dtype, a.shape) == (b.dtype, b.shape)
            and torch.equal(a, b)
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):  # an OrderedDict state_dict, a copy
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _everything(objects: dict[str, Any], values: Any = None) -> dict[str, Any]:
    """All a load can change: the objects' states, the random states, the values returned."""
    state = {name: _copy(obj.state_dict()) for name, obj in objects.items()}
    state["random"] = (random.getstate(), np.random.get_state(legacy=False), torch.get_rng_state())
    state["values"] = _copy(values)
    return state


def _fresh_load(path: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Load ``path`` into fresh objects: the outcome, the state before and after."""
    fresh = _objects(seed=1)
    random.seed(11)
    np.random.seed(12)
    torch.manual_seed(13)
    before = _everything(fresh)
    try:
        values = load(path, **fresh)
    except Exception as e:
        if not _same(_everything(fresh), before):
            return f"partial application ({type(e).__name__})", before, before
        if isinstance(e, ValueError) and str(path) in str(e):
            return "clear error", before, before
        return f"other exception ({type(e).__name__}: {e})", before, before
    return "loaded", before, _everything(fresh, values)


def _positions(data: bytes) -> dict[str, list[int]]:
    """Byte positions to damage, by region: every byte of some headers, directory entries,
    data descriptors, the end records and the seal; samples of the records' data."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = sorted(archive.infolist(), key=lambda i: i.header_offset)
        directory = archive.start_dir
    tensors = sorted(
        (i for i in infos if "/data/" in i.filename), key=lambda i: int(i.filename.split("/")[-1])
    )
    pickle_record = next(i for i in infos if i.filename.endswith("data.pkl"))
    torch_rng, numpy_rng = tensors[-2:]  # the generators' states are the last tensors saved
    chosen = (pickle_record, tensors[0], torch_rng, numpy_rng)
    regions: dict[str, list[int]] = {}

    def data_range(info: zipfile.ZipInfo) -> tuple[int, int]:
        names, extra = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
        start = info.header_offset + 30 + names + extra
        return start, start + info.compress_size

    def header_end(info: zipfile.ZipInfo) -> int:  # the fixed fields and the name
        return info.header_offset + 30 + len(info.orig_filename)

    regions["local headers and names"] = [
        p for info in chosen[1:] for p in range(info.header_offset, header_end(info))
    ]
    regions["local padding"] = [header_end(info) + i for info in chosen[1:] for i in (0, 2, 4)]
    regions["data descriptors"] = [
        p for info in chosen[1:3] for p in range(data_range(info)[1], data_range(info)[1] + 16)
    ]
    start, end = data_range(pickle_record)
    regions["data.pkl"] = list(range(start, end, max(1, (end - start) // 20)))
    regions["tensor data"] = [data_range(info)[0] for info in tensors[:-2]]
    regions["random states' data"] = [
        p for info in (torch_rng, numpy_rng) for p in range(*data_range(info), 999)
    ]
    entries, at = [], directory
    while data[at : at + 4] == b"PK\x01\x02":
        names, extra, comment = struct.unpack("<HHH", data[at + 28 : at + 34])
        entries.append((at, data[at + 46 : at + 46 + names].decode()))
        at += 46 + names + extra + comment
    regions["central directory"] = [
        p
        for i, (entry, name) in enumerate(entries)
        if name in {tensors[0].filename, torch_rng.filename}
        for p in range(entry, entries[i + 1][0] if i + 1 < len(entries) else at)
    ]
    end_record = data.rfind(b"PK\x05\x06")
    regions["end records"] = list(range(at, end_record + 22))
    regions["seal"] = list(range(end_record + 22, len(data), 3))
    return regions


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("damage")
    written = {"sealed": folder / "sealed.pt", "format 1": folder / "format1.pt"}
    state = {**_trained(), "step": 7, "best": {"loss": 0.25}, "ema": torch.ones(3)}
    save(written["sealed"], **state)
    save_format1(written["format 1"], **state)
    return written


@pytest.mark.filterwarnings("ignore:.*format 1")
@pytest.mark.parametrize("kind", ["sealed", "format 1"])
def test_no_byte_flip_loads_wrong_data_or_half_loads(
    kind: str, files: dict[str, Path], tmp_path: Path
) -> None:
    data = files[kind].read_bytes()
    outcome, _, reference = _fresh_load(files[kind])
    assert outcome == "loaded"
    regions = _positions(data)
    assert all(regions[r] for r in regions if r != "seal" or kind == "sealed")
    path = tmp_path / "damaged.pt"
    found: dict[str, dict[str, int]] = {}
    for region, positions in regions.items():
        for position in positions:
            damaged = bytearray(data)
            damaged[position] ^= 0xFF
            path.write_bytes(damaged)
            outcome, _, after = _fresh_load(path)
            if outcome == "loaded":
                outcome = "same data" if _same(after, reference) else "WRONG DATA"
            counts = found.setdefault(region, {})
            counts[outcome] = counts.get(outcome, 0) + 1
    allowed = {"clear error"} if kind == "sealed" else {"clear error", "same data"}
    assert {o for counts in found.values() for o in counts} <= allowed, found
    assert sum(sum(c.values()) for c in found.values()) >= 300


def test_a_damaged_random_state_changes_nothing(tmp_path: Path) -> None:
    """A random state that cannot be restored is found before the model is filled."""
    path = tmp_path / "old.pt"
    save_format1(path, model=nn.Linear(2, 2), step=1)
    payload = torch.load(path, weights_only=True)
    payload["rng"][0]["torch"] = torch.zeros(10, dtype=torch.uint8)  # not a generator state
    with open(path, "wb") as f:
        torch.save(payload, f)
    fresh = nn.Linear(2, 2)
    before = _copy(fresh.state_dict())
    with pytest.raises(ValueError, match=rf"{path} .*damaged: its random states.*torch's CPU"):
        load(path, model=fresh)
    assert _same(fresh.state_dict(), before)


def test_an_optimizer_that_does_not_fit_leaves_the_model_alone(tmp_path: Path) -> None:
    objects = _trained()
    save(tmp_path / "c.pt", model=objects["model"], optimizer=objects["optimizer"])
    fresh = _objects(seed=1)["model"]
    two_groups = torch.optim.AdamW(
        [{"params": list(fresh.parameters())[:2]}, {"params": list(fresh.parameters())[2:]}]
    )
    before = _copy(fresh.state_dict())
    with pytest.raises(
        ValueError,
        match=r"'optimizer' saved in .*parameter groups: 1 in the checkpoint, 2 here\. Nothing was",
    ):
        load(tmp_path / "c.pt", model=fresh, optimizer=two_groups)
    assert _same(fresh.state_dict(), before)


class _Refuses(nn.Linear):
    """A module whose own load_state_dict fails after the checks passed (a custom hook)."""

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("my hook refuses")


def test_a_load_that_fails_late_puts_back_what_it_can_and_names_the_rest(tmp_path: Path) -> None:
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    sched.step()
    save(tmp_path / "c.pt", model=model, optimizer=opt, scheduler=sched)

    fresh = _Refuses(2, 2)
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.01, momentum=0.9)
    fresh_sched = torch.optim.lr_scheduler.StepLR(fresh_opt, step_size=1, gamma=0.1)
    opt_before, sched_before = _copy(fresh_opt.state_dict()), _copy(fresh_sched.state_dict())
    with pytest.raises(
        ValueError, match=r"'model' .*my hook refuses.*'model' may be partly loaded"
    ):
        load(tmp_path / "c.pt", model=fresh, optimizer=fresh_opt, scheduler=fresh_sched)
    assert _same(fresh_opt.state_dict(), opt_before)  # loaded, then put back
    assert _same(fresh_sched.state_dict(), sched_before)
