"""``torchplace run``: bad input is refused before anything starts; the torchrun command."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_torchplace
from torchplace._cli import run as run_cli


def _torchplace(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_torchplace("run", *args, cwd=cwd, timeout=120)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text("import sys\nsys.exit(3)\n")
    return path


# --- bad input, through the real command line ---------------------------------------------


def test_a_module_of_a_package_in_the_current_folder_is_found(tmp_path: Path) -> None:
    """python -m finds packages in the current folder; so does torchplace run -m."""
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "train.py").write_text("print('trained')\n")
    # the installed command, whose sys.path starts with its own folder, not the current one
    command = Path(sys.executable).with_name("torchplace")
    result = subprocess.run(
        [str(command), "run", "--dry-run", "-m", "mypkg.train"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "-m mypkg.train" in result.stderr


@pytest.mark.parametrize(
    ("args", "error", "hint"),
    [
        (["missing.py"], r"no such script: missing\.py \(.*missing\.py does not exist\)", "-m"),
        (["-m", "no_such_pkg.train"], r"no module named 'no_such_pkg\.train'", "pip install"),
        (["--procs", "0", "{script}"], r"--procs must be at least 1, got 0", "--procs 1"),
        (["--gpus", "1", "--procs", "2", "{script}"], r"--gpus 1 and --procs 2 were both", "one"),
        (["--nodes", "2", "{script}"], r"--nodes 2 needs --rdzv-endpoint HOST:PORT", "29400"),
    ],
)
def test_bad_input_is_an_error_with_a_hint_and_nothing_starts(
    script: Path, args: list[str], error: str, hint: str
) -> None:
    result = _torchplace(*[a.format(script=script) for a in args], cwd=script.parent)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert re.search(error, lines[0]), lines[0]
    assert hint in lines[1]
    assert "torch.distributed.run" not in result.stderr  # no launch was printed or made


def test_asking_for_gpus_on_a_machine_without_one_suggests_cpu_processes(script: Path) -> None:
    if run_cli._visible_gpus():
        pytest.skip("this machine has a GPU")
    result = _torchplace("--gpus", "2", str(script))
    assert result.returncode == 2
    assert "error: --gpus 2 asks for GPUs, but none is visible here" in result.stderr
    assert "hint: use --procs 2 to run 2 CPU processes with gloo" in result.stderr


def test_the_exit_code_is_torchruns(script: Path) -> None:
    result = _torchplace(str(script))  # the script exits with 3: torchrun reports a failure
    assert result.returncode == 1, result.stderr[-2000:]
    assert "exitcode  : 3" in result.stderr  # torchrun's report names the worker's code


# --- the torchrun command, with the GPU count patched -------------------------------------


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def _plan(*argv: str, gpus: int) -> tuple[list[str], dict[str, str], str]:
    command, env, note = run_cli._launch_plan(_args(*argv), gpus)
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    return command[3:], env, note


def test_by_default_one_process_per_visible_gpu() -> None:
    torchrun, env, note = _plan("train.py", "--lr", "0.1", gpus=4)
    assert torchrun == ["--nproc-per-node", "4", "--standalone", "train.py", "--lr", "0.1"]
    assert "one per visible GPU" in note and env.get("CUDA_VISIBLE_DEVICES") != ""


def test_without_a_gpu_one_cpu_process_and_it_says_so() -> None:
    torchrun, _, note = _plan("train.py", gpus=0)
    assert torchrun[:3] == ["--nproc-per-node", "1", "--standalone"]
    assert "no GPU is visible, so 1 CPU process (gloo); --procs N starts N" in note


def test_procs_hides_the_gpus_and_sets_threads_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(run_cli.os, "cpu_count", lambda: 16)
    torchrun, env, note = _plan("--procs", "2", "-m", "torchplace.demo", "--epochs", "1", gpus=8)
    assert torchrun == [
        "--nproc-per-node", "2", "--standalone", "-m", "torchplace.demo", "--epochs", "1"
    ]  # fmt: skip
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["OMP_NUM_THREADS"] == "8"
    assert "2 CPU process(es) (gloo)" in note and "hidden" in note


def test_gpus_within_and_beyond_what_is_visible() -> None:
    torchrun, _, _ = _plan("--gpus", "2", "train.py", gpus=4)
    assert torchrun[:2] == ["--nproc-per-node", "2"]
    with pytest.raises(ValueError, match=r"--gpus 8 asks for more GPUs than the 4 visible") as e:
        _plan("--gpus", "8", "train.py", gpus=4)
    assert "--gpus 4" in getattr(e.value, "hint", "")


def test_max_restarts_is_passed_with_a_fresh_store_per_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", raising=False)
    torchrun, env, _ = _plan("--max-restarts", "3", "train.py", gpus=1)
    assert torchrun == ["--nproc-per-node", "1", "--standalone", "--max-restarts", "3", "train.py"]
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    with pytest.raises(ValueError, match="--max-restarts must be 0 or more"):
        _plan("--max-restarts", "-1", "train.py", gpus=1)


def test_several_machines_numbered_by_hand_use_a_static_rendezvous() -> None:
    args = ("--nodes", "2", "--node-rank", "1", "--rdzv-endpoint", "10.0.0.1:29400", "t.py")
    torchrun, _, note = _plan(*args, gpus=8)
    assert torchrun == [
        "--nproc-per-node", "8", "--nnodes", "2", "--node-rank", "1",
        "--rdzv-backend", "static", "--rdzv-endpoint", "10.0.0.1:29400", "t.py",
    ]  # fmt: skip
    assert "on each of 2 machines" in note


def test_several_machines_that_meet_by_id_use_a_c10d_rendezvous() -> None:
    args = ("--nodes", "4", "--rdzv-endpoint", "head:29400", "--rdzv-id", "job7", "t.py")
    torchrun, _, _ = _plan(*args, gpus=2)
    assert torchrun == [
        "--nproc-per-node", "2", "--nnodes", "4", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", "head:29400", "--rdzv-id", "job7", "t.py",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--nodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"), r"outside 0\.\.1"),
        (("--node-rank", "1"), r"--node-rank 1 needs --nodes above 1"),
        (("--rdzv-id", "x"), r"--rdzv-id needs --rdzv-endpoint"),
        (("--nodes", "2", "--rdzv-endpoint", "nohostport"), r"'nohostport' is not HOST:PORT"),
        (("--nodes", "0"), r"--nodes must be at least 1"),
    ],
)
def test_bad_multi_node_options_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _plan(*argv, "t.py", gpus=1)
