"""Planning from Python (torchplace.sim.planning): what ``torchplace sim`` does, as calls.

End to end through the command line: tests/test_cli_sim.py, tests/test_sim_distributed.py
(ranks), tests/test_sim_plan.py (--gpu all, --find-max), tests/test_sim_signals.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchplace.sim import planning

MiB, GiB = 2**20, 2**30

DDP = """\
import torch, torch.distributed as dist
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(__import__("os").environ["LOCAL_RANK"]))
x = torch.ones(256 * 1024 * (rank + 1), device="cuda")  # 1 MiB on rank 0, 2 MiB on rank 1
dist.all_reduce(x)
dist.destroy_process_group()
"""


def test_run_returns_the_report_and_costs(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys, torch\nx = torch.empty(int(sys.argv[1]), device='cuda')\n")
    report = planning.run(
        str(script), ["1048576"], gpu="T4", values="placeholder", output=False, prices={"T4": 0.5}
    )
    assert report.exit_code == 0 and report.gpu["key"] == "t4"
    assert report.device(0).peak_allocated_bytes == 4 * MiB  # float32
    assert report.costs["usd_per_hour"] == {"t4": 0.5}


def test_several_gpus_are_one_run_replayed(tmp_path: Path) -> None:
    script = tmp_path / "big.py"
    script.write_text(
        "import torch\nx = torch.empty(20 * 1024**3, dtype=torch.uint8, device='cuda')\n"
    )
    report = planning.run(str(script), gpu=["T4", "H100"], values="placeholder", output=False)
    fits = {row["key"]: not row.get("oom") for row in report.plan["gpus"]}
    assert fits == {"t4": False, "h100-sxm-80gb": True}
    assert len(report.plan["runs"]) == 1


def test_ranks_from_python(tmp_path: Path) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(DDP)
    report = planning.ranks(
        str(script), nproc_per_node=2, gpu="H100", values="placeholder", output=False
    )
    (world,) = report.ranks
    assert (world["world"], world["nproc_per_node"], world["values"]) == (2, 2, "placeholder")
    rows = {row["rank"]: row for row in world["ranks"]}
    assert sorted(rows) == [0, 1] and rows[1]["device"] == 1
    assert rows[1]["peak_allocated_bytes"] > rows[0]["peak_allocated_bytes"]
    assert report.interrupted is None and report.exit_code == 0


def test_find_max_from_python(tmp_path: Path) -> None:
    script = tmp_path / "size.py"
    script.write_text(
        "import sys, torch\n"
        "x = torch.empty(int(sys.argv[1]) * 1024**3, dtype=torch.uint8, device='cuda')\n"
    )
    said: list[str] = []
    found = planning.find_max(
        str(script), ["{GIB}"], name="GIB", gpu="T4", memory=4 * GiB, high=8, progress=said.append
    )
    result = found.results["t4"]
    assert result.largest == 3 and not result.stopped  # 4 GiB less the CUDA context and margin
    assert found.exit_code == 0 and found.interrupted is None
    assert said[0] == "{GIB} = 1: t4: fits"
    assert found.to_dict()["find_max"]["t4"]["largest"] == 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: planning.Script(gpus=0), "gpus must be at least 1"),
        (lambda: planning.Script(values="fake"), "values must be 'auto'"),
        (lambda: planning.gpus("B900"), "B900"),
        (lambda: planning.rank_list("0,9", 4), "--rank 9 is not a rank of a world of 4"),
        (lambda: planning.find_max("x.py", ["8"], name="SIZE_NOWHERE"), "{SIZE_NOWHERE} appears"),
        (lambda: planning.ranks("x.py", nproc_per_node=2, gpu="H100,A100"), "one GPU model"),
    ],
    ids=["gpus", "values", "gpu", "rank", "token", "ranks-gpus"],  # PYTEST_CURRENT_TEST holds
    # the id, and find_max looks for its {NAME} in the environment too
)
def test_bad_input_is_refused_before_anything_runs(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        call()
