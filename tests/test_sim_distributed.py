"""``torchplace sim --nproc-per-node``: torchrun scripts (DDP, FSDP2) simulated rank by rank.

The scripts are written as for torchrun on GPUs (RANK / WORLD_SIZE / LOCAL_RANK, NCCL,
DeviceMesh). With real values every rank of a world runs at once over gloo; with
placeholders each rank shown runs alone under torch's fake process group. The report gives
each rank's peak, what it holds, and its time.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console

from helpers import run_torchplace
from torchplace import catalog
from torchplace.sim.report import render_ranks
from torchplace.sim.search import FindMaxError, find_max
from torchplace.timemodel import params

MIB = 1024**2

# Five 512×512 layers (1 MiB of fp32 weights each): four sharded one by one, the last in the
# root's group (as torchtitan does with the output layer), which FSDP keeps gathered
# (unsharded) from forward through backward.
FSDP_SCRIPT = """
import os
import torch, torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
model = nn.Sequential(*(nn.Linear(512, 512, bias=False) for _ in range(5))).cuda()
for layer in model[:4]:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.AdamW(model.parameters(), foreach=True)
for _ in range(2):
    model(torch.randn(2048, 512, device="cuda")).square().mean().backward()
    opt.step()
    opt.zero_grad()
if dist.get_rank() == 0:  # rank 0 gathers something for logging: 64 MiB more
    summary = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
dist.destroy_process_group()
"""

DDP_SCRIPT = """
import os
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
model = DDP(nn.Sequential(*(nn.Linear(1024, 1024) for _ in range(4))).cuda(), device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(64, 1024, device="cuda")).square().mean().backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
"""


def _ranks(tmp_path: Path, script: str, *args: str) -> list[dict[str, Any]]:
    path = tmp_path / "train.py"
    path.write_text(script)
    r = run_torchplace("sim", "--json", *args, str(path))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)["ranks"]


def _near(a: float, b: float, tolerance: float = 0.02) -> bool:
    return abs(a - b) <= tolerance * max(abs(a), abs(b))


@pytest.mark.slow
def test_fsdp_sweep_shards_per_rank_and_shows_rank_0_extra_work(tmp_path: Path) -> None:
    # 1 and 4 only, to keep CI short (``torchplace sim --nproc-per-node 1,2,4,8`` by hand)
    sweep = _ranks(tmp_path, FSDP_SCRIPT, "--nproc-per-node", "1,4")
    assert [w["world"] for w in sweep] == [1, 4]
    assert [[r["rank"] for r in w["ranks"]] for w in sweep] == [[0], [0, 3]]
    weights = 5 * 512 * 512 * 4
    for w in sweep:
        last = w["ranks"][-1]
        assert last["error"] is None
        # each rank keeps 1/W of every weight, and AdamW's two states for that shard
        assert _near(last["peak_breakdown"]["parameters"], weights / w["world"])
        if w["world"] > 1:  # the peak is in backward: layers FSDP gathered are whole
            assert last["peak_breakdown"]["unsharded_parameters"] >= 512 * 512 * 4
            assert last["communication_seconds"] > 0
            assert 0 < last["communication_seconds"] < last["step_seconds"]
            assert last["compute_seconds"] > 0
            # rank 0's 64 MiB summary, made after training, raises its peak alone
            rank0 = w["ranks"][0]
            assert rank0["peak_allocated_bytes"] > last["peak_allocated_bytes"] + 16 * MIB
            assert rank0["peak_breakdown"]["other"] >= (64 + 32) * MIB  # + cuBLAS workspace
        else:
            assert last["communication_seconds"] == 0
    # more ranks: less memory per rank (shards and optimizer state), more communication
    lasts = [w["ranks"][-1] for w in sweep]
    peaks = [r["peak_allocated_bytes"] for r in lasts]
    assert peaks == sorted(peaks, reverse=True) and peaks[0] > peaks[-1]
    # the text report renders the same rows
    out = io.StringIO()
    render_ranks(sweep, Console(file=out, width=200))
    text = out.getvalue()
    assert "Per rank: 4 processes (4 per node × 1 node(s))" in text
    assert "unsharded" in text


@pytest.mark.slow
def test_ddp_per_rank_and_the_network_between_nodes(tmp_path: Path) -> None:
    # placeholder values: only the two ranks shown run, each under the fake process group
    args = ("--nproc-per-node", "2", "--nnodes", "2", "--values", "placeholder")
    ranks = _ranks(tmp_path, DDP_SCRIPT, *args)[0]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 3]  # rank 3 is on the second node
    weights = 4 * (1024 * 1024 + 1024) * 4
    for r in ranks:
        assert r["error"] is None
        # DDP keeps whole replicas, and its gradient buckets are communication buffers
        assert _near(r["peak_breakdown"]["parameters"], weights)
        assert r["peak_breakdown"]["communication"] >= weights * 0.98
        # per step, a ring all-reduce of every gradient among 4 ranks sends 2·3/4 of them per
        # rank, and DDP's constructor broadcasts the weights once (its share: half, over 2
        # steps), over the slowest link the group crosses: the network (ib-ndr-400), not
        # NVLink, at the bus bandwidth NCCL reaches on it (torchplace.timemodel.comm)
        sent = 2 * 3 / 4 * weights + weights / 2
        efficiency = params.load()["collective.efficiency"]
        expected = sent / (catalog.network().bandwidth_bytes_per_s * efficiency)
        assert expected * (1 - 1e-9) < r["communication_seconds"] < expected + 16 * 20e-6
        assert r["compute_seconds"] > 0


def test_mesh_shape_that_does_not_match_the_world_fails_at_the_users_line(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch.distributed as dist\n"
        "from torch.distributed.device_mesh import init_device_mesh\n"
        'dist.init_process_group("nccl")\n'
        'mesh = init_device_mesh("cuda", (2, 2))\n'
    )
    r = run_torchplace("sim", "--nproc-per-node", "2", "--rank", "0", "--json", str(script))
    assert r.returncode != 0
    error = json.loads(r.stdout)["ranks"][0]["ranks"][0]["error"]
    assert error["line"] == 4 and error["file"].endswith("train.py")
    assert "mesh" in error["message"].lower() and "4" in error["message"]  # torch's own words


def test_rank_command_line_errors(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    r = run_torchplace("sim", "--nproc-per-node", "2", "--gpu", "H100,B900", str(script))
    assert r.returncode == 2 and "B900" in r.stderr
    r = run_torchplace("sim", "--nproc-per-node", "2", "--gpu", "H100,A100", str(script))
    assert r.returncode == 2 and "one GPU model" in r.stderr
    r = run_torchplace("sim", "--nproc-per-node", "2,x", str(script))
    assert r.returncode == 2 and "'2,x'" in r.stderr
    r = run_torchplace("sim", "--nproc-per-node", "2", "--rank", "5", str(script))
    assert r.returncode == 2 and "--rank 5" in r.stderr
    # real values for 64 ranks whose processes alone need more than the limit given
    r = run_torchplace(
        "sim", "--nproc-per-node", "64", "--values", "real", "--host-memory-limit", "4GiB",
        str(script),
    )  # fmt: skip
    assert r.returncode == 2 and "64 rank processes need about 24.00 GiB" in r.stderr
    assert "--values placeholder" in r.stderr


def test_find_max_when_the_size_never_reaches_the_gpu() -> None:
    def step(batch: int) -> None:  # the batch size is read, but the tensor ignores it
        torch.empty(8 * MIB, dtype=torch.uint8, device="cuda")

    with pytest.raises(FindMaxError, match="does not reach the GPU"):
        find_max(step, gpu="T4", high=1 << 12)


def test_find_max_reports_the_first_failure_of_a_script_that_always_fails(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys, torch\nbatch = int(sys.argv[1])\nraise KeyError('lr')\n")
    r = run_torchplace("sim", "--find-max", "B", str(script), "{B}")
    assert r.returncode == 2
    assert "the run at size 1 failed at" in r.stderr and "train.py:3 with KeyError" in r.stderr


# DTensor's random ops (nn.init on FSDP2 shards) go through its RNG tracker, which reads the
# CUDA generator's state as (seed, Philox offset), moves the offset for each shard and makes
# every rank hold rank 0's state (torch/distributed/tensor/_random.py).
DTENSOR_INIT_SCRIPT = """
import os
import torch, torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (2,))
torch.manual_seed(0)
model = nn.Linear(64, 64, bias=False).cuda()
fully_shard(model, mesh=mesh)
nn.init.normal_(model.weight)  # a random op on a DTensor: each rank draws its shard
full = model.weight.full_tensor()
assert full.std() > 0.5 and not torch.equal(full[:32], full[32:]), "shards drew alike"
everyone = [torch.empty_like(full) for _ in range(2)]
dist.all_gather(everyone, full)
assert torch.equal(everyone[0], everyone[1])
state = torch.cuda.get_rng_state()
assert state.shape == (16,) and int(state[8:].view(torch.int64)) >= 64 * 64
print("rank", dist.get_rank(), "ok", float(full.sum()))
dist.destroy_process_group()
"""


def test_real_values_across_ranks_run_dtensors_random_init(tmp_path: Path) -> None:
    path = tmp_path / "init.py"
    path.write_text(DTENSOR_INIT_SCRIPT)
    r = run_torchplace("sim", "--json", "--nproc-per-node", "2", str(path))
    assert r.returncode == 0, r.stderr[-3000:]
    world = json.loads(r.stdout)["ranks"][0]
    assert world["values"] == "real"
    assert [row["error"] for row in world["ranks"]] == [None, None]
    assert "rank 0 ok" in r.stderr  # the first rank's output is the script's


def test_a_failing_rank_stops_the_others(tmp_path: Path) -> None:
    path = tmp_path / "fail.py"
    path.write_text(
        "import os, torch, torch.distributed as dist\n"
        "dist.init_process_group('nccl')\n"
        "if dist.get_rank() == 1:\n"
        "    raise ValueError('rank 1 gives up')\n"
        "dist.barrier()  # rank 0 would wait here for ever\n"
    )
    r = run_torchplace("sim", "--json", "--nproc-per-node", "2", "--timeout", "120", str(path))
    assert r.returncode != 0
    rows = json.loads(r.stdout)["ranks"][0]["ranks"]
    assert rows[1]["error"]["type"] == "ValueError" and rows[1]["error"]["line"] == 4
    assert rows[0]["error"]["type"] == "Stopped"
    assert "stopped when rank 1 failed (ValueError: rank 1 gives up)" in rows[0]["error"]["message"]


def test_ranks_whose_real_values_do_not_fit_run_with_placeholders(tmp_path: Path) -> None:
    path = tmp_path / "big.py"
    path.write_text(
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('nccl')\n"
        "x = torch.ones(64 * 2**20 // 4, device='cuda')  # 64 MiB per rank\n"
        "dist.all_reduce(x)\n"
    )
    # 800 MiB for 2 ranks: 384 MiB of each is its process, 16 MiB for its data
    r = run_torchplace(
        "sim", "--json", "--nproc-per-node", "2", "--host-memory-limit", "800MiB", str(path)
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    world = report["ranks"][0]
    assert world["values"] == "placeholder"
    assert [row["error"] for row in world["ranks"]] == [None, None]
    assert report["notes"][0]["text"].startswith(
        "values: placeholder for the 2-rank world — the run was repeated with placeholder "
        "values because the real values of 2 ranks would not fit in host memory (at "
    )
