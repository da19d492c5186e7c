"""Checkpoints: round trips, DDP unwrapping, CUDA-tagged files on a CPU, atomicity, damage."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch import nn

from helpers import save_format1
from torchplace.runner import checkpoint, load, save


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def _trained(
    seed: int = 0,
) -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.StepLR]:
    model = _net(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        model(torch.randn(16, 4)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    return model, opt, sched


def _same_weights(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture
def gloo_group(tmp_path: Path) -> Iterator[None]:
    """A real one-process gloo group for this test, destroyed afterwards."""
    assert not dist.is_initialized()
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_round_trip_restores_model_optimizer_scheduler_scaler_and_values(tmp_path: Path) -> None:
    model, opt, sched = _trained()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
    path = tmp_path / "ckpt.pt"
    save(path, model=model, optimizer=opt, scheduler=sched, scaler=scaler, step=300,
         best={"loss": 0.25, "epoch": 4}, history=[1.0, 0.5], tag="run-1", ema=torch.ones(3))  # fmt: skip

    model2, opt2, sched2 = _trained(seed=1)
    scaler2 = torch.amp.GradScaler("cpu", init_scale=2.0)
    assert not _same_weights(model, model2)
    values = load(path, model=model2, optimizer=opt2, scheduler=sched2, scaler=scaler2)

    assert _same_weights(model, model2)
    assert opt2.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
    for a, b in zip(opt.state.values(), opt2.state.values(), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert sched2.state_dict() == sched.state_dict()
    assert scaler2.get_scale() == 1024.0
    assert values.keys() == {"step", "best", "history", "tag", "ema"}
    assert (values["step"], values["best"], values["history"], values["tag"]) == (
        300,
        {"loss": 0.25, "epoch": 4},
        [1.0, 0.5],
        "run-1",
    )
    assert torch.equal(values["ema"], torch.ones(3))


def test_load_restores_python_numpy_and_torch_random_states(tmp_path: Path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    save(tmp_path / "c.pt", step=0)
    expected = (random.random(), np.random.rand(), torch.rand(3))
    random.seed(10)
    np.random.seed(20)
    torch.manual_seed(30)
    load(tmp_path / "c.pt")
    got = (random.random(), np.random.rand(), torch.rand(3))
    assert got[:2] == expected[:2]
    assert torch.equal(got[2], expected[2])


def test_cuda_generator_states_are_kept_once_cuda_is_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = [torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([3, 4], dtype=torch.uint8)]
    restored: list[torch.Tensor] = []
    monkeypatch.setattr(checkpoint, "_cuda_initialized", lambda: True)
    monkeypatch.setattr(checkpoint, "_cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: states)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.extend)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # loaded where 1 GPU is visible
    save(tmp_path / "gpu.pt", step=1)
    load(tmp_path / "gpu.pt")
    assert len(restored) == 1 and torch.equal(restored[0], states[0])

    def started() -> None:
        raise AssertionError("reading CUDA's generator states would start CUDA")

    monkeypatch.setattr(checkpoint, "_cuda_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", started)
    save(tmp_path / "cpu.pt", step=2)
    assert "cuda" not in torch.load(tmp_path / "cpu.pt", weights_only=True)["rng"][0]


def test_a_ddp_model_is_saved_without_the_module_prefix_and_loads_either_way(
    tmp_path: Path, gloo_group: None
) -> None:
    model = _net()
    ddp = nn.parallel.DistributedDataParallel(model)
    save(tmp_path / "ddp.pt", model=ddp)  # the distributed path: rank 0 writes, flag broadcast
    saved = torch.load(tmp_path / "ddp.pt", weights_only=True)["objects"]["model"]
    assert saved.keys() == model.state_dict().keys()
    assert not any(k.startswith("module.") for k in saved)

    plain = _net(seed=5)
    load(tmp_path / "ddp.pt", model=plain)
    assert _same_weights(plain, model)
    wrapped = nn.parallel.DistributedDataParallel(_net(seed=6))
    load(tmp_path / "ddp.pt", model=wrapped)
    assert _same_weights(wrapped.module, model)


def _save_with_cuda_tags(path: Path, monkeypatch: pytest.MonkeyPatch, **state: object) -> None:
    """Write what a save on a GPU writes: every storage tagged 'cuda:0' in the file.

    torch.save asks ``torch.serialization.location_tag`` where each storage lives and writes
    the answer into the pickle; a GPU answers "cuda:0". The bytes are those of a real
    GPU checkpoint; only the tensor values come from the CPU.
    """
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        save(path, **state)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_checkpoint_saved_on_cuda_loads_on_a_cpu_only_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, opt, _ = _trained()
    path = tmp_path / "gpu.pt"
    _save_with_cuda_tags(path, monkeypatch, model=model, optimizer=opt, step=9, ema=torch.ones(2))
    with zipfile.ZipFile(path) as archive:
        pickle_bytes = next(archive.read(n) for n in archive.namelist() if n.endswith("data.pkl"))
    assert b"cuda:0" in pickle_bytes and b"cpu" not in pickle_bytes
    with pytest.raises(RuntimeError, match="CUDA"):  # what plain torch.load does here
        torch.load(path, weights_only=True)

    model2, opt2, _ = _trained(seed=1)
    values = load(path, model=model2, optimizer=opt2)
    assert _same_weights(model, model2)
    assert next(model2.parameters()).device.type == "cpu"
    assert values["step"] == 9 and values["ema"].device.type == "cpu"


def test_a_failing_replace_leaves_the_old_checkpoint_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _net(seed=0)
    path = tmp_path / "ckpt.pt"
    save(path, model=old, step=1)

    def crash(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(RuntimeError, match=r"could not write the checkpoint .*ckpt\.pt.*untouched"):
        save(path, model=_net(seed=1), step=2)
    monkeypatch.undo()

    assert os.listdir(tmp_path) == ["ckpt.pt"]
    fresh = _net(seed=2)
    assert load(path, model=fresh) == {"step": 1}
    assert _same_weights(fresh, old)


_KILLED_DURING_WRITE = textwrap.dedent(
    """
    import os, signal, sys, torch
    from torchplace.runner import save

    def killed(fd):  # the data is written, not yet durable or renamed: die like a power cut
        os.kill(os.getpid(), signal.SIGKILL)

    os.fsync = killed
    save(sys.argv[1], weights=torch.full((256, 256), 2.0), step=2)
    """
)


def test_a_save_killed_midway_keeps_the_old_checkpoint_and_the_next_save_cleans_up(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ckpt.pt"
    save(path, weights=torch.full((256, 256), 1.0), step=1)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_DURING_WRITE, str(path)], capture_output=True, timeout=120
    )
    assert killed.returncode == -9, killed.stderr.decode()
    leftovers = [n for n in os.listdir(tmp_path) if n != "ckpt.pt"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".ckpt.pt.tmp-")  # SIGKILL: no cleanup

    values = load(path)
    assert values["step"] == 1 and torch.equal(values["weights"], torch.full((256, 256), 1.0))

    save(path, weights=torch.zeros(1), step=3)  # the writer is dead: its temporary file goes
    assert os.listdir(tmp_path) == ["ckpt.pt"]
    assert load(path)["step"] == 3


def test_a_temporary_file_of_a_live_writer_is_left_alone(tmp_path: Path) -> None:
    mine = tmp_path / f".ckpt.pt.tmp-{os.getpid()}-abc123"
    mine.write_bytes(b"in progress")
    save(tmp_path / "ckpt.pt", step=1)
    assert mine.exists()


def _valid_file(tmp_path: Path) -> Path:
    path = tmp_path / "ckpt.pt"
    save(path, model=_net(), step=5)
    return path


def test_a_truncated_file_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    path = _valid_file(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=rf"checkpoint {path} \(\d+ bytes\) is damaged.*cut short"):
        load(path, model=_net())


@pytest.mark.parametrize(
    ("sealed", "caught_by"),
    [(True, "its SHA-256 differs from the one sealed in it"), (False, "fails its CRC-32 check")],
)
def test_a_corrupted_tensor_byte_is_caught(tmp_path: Path, sealed: bool, caught_by: str) -> None:
    path = tmp_path / "ckpt.pt"
    if sealed:
        save(path, model=_net(), step=5)
    else:  # a file from before the seal: each record's CRC-32 still catches it
        save_format1(path, model=_net(), step=5)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if "/data/" in i.filename)
    local = info.header_offset  # the local header: 30 bytes, the name, then the extra field
    name_length = int.from_bytes(data[local + 26 : local + 28], "little")
    extra_length = int.from_bytes(data[local + 28 : local + 30], "little")
    offset = local + 30 + name_length + extra_length + 3
    data[offset] ^= 0xFF  # a flipped bit inside a tensor: torch.load alone would not notice
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"{path}.*damaged: .*{caught_by}.*nothing was loaded"):
        load(path, model=_net())


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all" * 10])
def test_empty_or_garbage_files_are_clear_errors(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"{path}.*damaged"):
        load(path)


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "ckpt.pt"
    with pytest.raises(FileNotFoundError, match=rf"no checkpoint at {missing}.*does not exist"):
        load(missing, model=_net())


def test_a_plain_torch_file_is_not_mistaken_for_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save(_net().state_dict(), path)
    with pytest.raises(ValueError, match=r"not a torchplace checkpoint.*torch\.load"):
        load(path, model=_net())


class _Custom:
    pass


def test_a_file_with_arbitrary_objects_is_refused_without_running_them(tmp_path: Path) -> None:
    path = tmp_path / "pickled.pt"
    torch.save({"format": "torchplace.checkpoint", "obj": _Custom()}, path)
    with pytest.raises(ValueError, match=r"weights_only=True\) refuses.*not written by torchplace"):
        load(path)


def test_loading_into_a_model_of_another_shape_names_the_mismatch(tmp_path: Path) -> None:
    path = _valid_file(tmp_path)
    wider = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
    with pytest.raises(
        ValueError, match=r"(?s)'model' saved in .* not fit the Sequential.*size mismatch"
    ):
        load(path, model=wider)


def test_asking_for_a_name_that_was_not_saved_lists_what_was(tmp_path: Path) -> None:
    path = _valid_file(tmp_path)
    with pytest.raises(ValueError, match=r"has no 'optimizer': .*\['model'\].*\['step'\]"):
        load(path, optimizer=torch.optim.SGD(_net().parameters(), lr=0.1))


def test_plain_values_passed_to_load_are_refused_with_the_right_usage(tmp_path: Path) -> None:
    path = _valid_file(tmp_path)
    with pytest.raises(ValueError, match=r"step= is a int.*load\(path, model=model\)\['step'\]"):
        load(path, step=0)


def test_values_that_weights_only_cannot_read_are_refused_at_save_time(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"save\(config=\.\.\.\) holds a _Custom \(inside dict\)"):
        save(tmp_path / "c.pt", config={"a": _Custom()})
    with pytest.raises(ValueError, match=r"nothing to save"):
        save(tmp_path / "c.pt")
    assert not (tmp_path / "c.pt").exists()


def test_save_creates_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "a" / "last.pt"
    save(path, step=1)
    assert load(path) == {"step": 1}


def test_unwrap_is_used_for_compiled_models_too(tmp_path: Path) -> None:
    class Compiled(nn.Module):  # what torch.compile returns: the model as _orig_mod
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self._orig_mod = inner

    model = _net()
    save(tmp_path / "c.pt", model=Compiled(model))
    assert (
        torch.load(tmp_path / "c.pt", weights_only=True)["objects"]["model"].keys()
        == model.state_dict().keys()
    )


@pytest.mark.parametrize("floats", [4, 5 * 2**20])  # one 16 MiB block; two (20 MiB)
def test_the_file_is_sealed_with_a_sha256_of_all_its_other_bytes(
    tmp_path: Path, floats: int
) -> None:
    path = tmp_path / "c.pt"
    save(path, weights=torch.ones(floats), step=1)
    data = path.read_bytes()
    with zipfile.ZipFile(path) as archive:  # any zip tool sees the seal as the archive comment
        comment = archive.comment
    assert comment.startswith(b"torchplace checkpoint 2; data full; sha256 of 16 MiB blocks ")
    covered, block = data[:-64], 16 * 2**20
    blocks = [
        hashlib.sha256(covered[i : i + block]).digest() for i in range(0, len(covered), block)
    ]
    assert len(blocks) == (1 if floats == 4 else 2)
    assert (
        data.endswith(comment)
        and comment[-64:] == hashlib.sha256(b"".join(blocks)).hexdigest().encode()
    )
    assert torch.load(path, weights_only=True)["values"]["step"] == 1  # still a torch file
    assert load(path)["step"] == 1


def test_a_format_1_file_still_loads_with_a_warning_saying_what_was_checked(
    tmp_path: Path,
) -> None:
    model, opt, sched = _trained()
    path = tmp_path / "old.pt"
    save_format1(path, model=model, optimizer=opt, scheduler=sched, step=3)
    model2, opt2, sched2 = _trained(seed=1)
    with pytest.warns(UserWarning, match=r"format 1.*zip structure, every record's CRC-32"):
        assert load(path, model=model2, optimizer=opt2, scheduler=sched2) == {"step": 3}
    assert _same_weights(model, model2) and sched2.state_dict() == sched.state_dict()


def test_a_sealed_file_that_lost_its_seal_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save(path, step=1)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        length = len(archive.comment)
    del data[-length:]
    data[-2:] = b"\0\0"  # the end record without a comment: what another zip tool may write
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"{path} .*damaged: .*format 2, whose seal .* missing"):
        load(path)


def test_a_placeholder_file_of_a_simulation_loads_there_and_nowhere_else(tmp_path: Path) -> None:
    from torchplace.sim import simulate

    path = tmp_path / "ckpt.pt"
    save(path, step=0)  # the user's real checkpoint
    real = path.read_bytes()
    with simulate("H100", values="placeholder") as report:
        model = nn.Linear(3, 3).cuda()
        save(path, model=model, step=1)  # simulated tensors: written elsewhere, without data
        assert load(path, model=nn.Linear(3, 3).cuda()) == {"step": 1}
    assert path.read_bytes() == real
    (written,) = [f["written_to"] for f in report.files]
    with pytest.raises(ValueError, match=r"written by `torchplace sim` with placeholder values"):
        load(written, model=nn.Linear(3, 3))
