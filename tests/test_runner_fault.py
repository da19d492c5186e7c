"""Fault tolerance end to end: under ``torchplace run --procs 2 --max-restarts 1`` a worker
dies mid-training, torchrun restarts the job, it resumes from the last checkpoint, and the
final weights equal those of a run that never failed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

# A training script like a user's: checkpoints at every epoch end, resumes from the last
# one. TORCHPLACE_TEST_FAIL_AT_STEP=k makes rank 1 die at step k, once (a marker file
# remembers that it already did), like a node that crashes.
_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path

    import torch
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset

    from torchplace import Runner, load, save

    out = Path(sys.argv[1])
    checkpoint = out / "ckpt.pt"
    fail_at = int(os.environ.get("TORCHPLACE_TEST_FAIL_AT_STEP", "-1"))
    torch.set_num_threads(1)

    with Runner() as runner:
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        model, opt = runner.setup(net, torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9))
        g = torch.Generator().manual_seed(1)
        x = torch.randn(64, 4, generator=g)
        y = x.sum(dim=1, keepdim=True).sin()
        data = DataLoader(
            TensorDataset(x, y), batch_size=8, shuffle=True,
            generator=torch.Generator().manual_seed(2),
        )
        loader = runner.loader(data)

        epoch, step = 0, 0
        if checkpoint.exists():
            state = load(checkpoint, model=model, optimizer=opt)
            epoch, step = state["epoch"], state["step"]
            if runner.is_main:
                with open(out / "resumed.txt", "a") as f:
                    f.write(f"{epoch} {step}\\n")
        loader.set_epoch(epoch)
        for epoch in range(epoch, 4):
            for xb, yb in loader:
                if step == fail_at and runner.rank == 1 and not (out / "failed").exists():
                    (out / "failed").touch()
                    os._exit(1)
                runner.backward(F.mse_loss(model(xb), yb))
                runner.step(opt)
                step += 1
            save(checkpoint, model=model, optimizer=opt, epoch=epoch + 1, step=step)
        if runner.is_main:
            torch.save(net.state_dict(), out / "final.pt")
    """
)


def _launch(script: Path, out: Path, *, fail_at: int | None) -> tuple[int, str]:
    """Run the script under ``torchplace run``; return its exit code and stderr."""
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TORCHPLACE_TEST_FAIL_AT_STEP"}
    if fail_at is not None:
        env["TORCHPLACE_TEST_FAIL_AT_STEP"] = str(fail_at)
    command = [sys.executable, "-m", "torchplace", "run", "--procs", "2", "--max-restarts", "1"]
    process = subprocess.Popen(
        [*command, str(script), str(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # torchrun and its workers: one group to kill on a hang
    )
    try:
        _, stderr = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("torchplace run did not finish within 240 s (killed)")
    return process.returncode, stderr


@pytest.mark.slow
def test_a_worker_killed_mid_training_resumes_from_the_checkpoint_to_the_same_weights(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)

    # 64 samples, 2 processes x 8 per batch: 4 steps per epoch. Step 10 is in epoch 2,
    # after the checkpoint of step 8.
    code, stderr = _launch(script, tmp_path / "failed", fail_at=10)
    assert code == 0, stderr[-3000:]
    assert (tmp_path / "failed" / "failed").exists(), "rank 1 never died: nothing was tested"
    assert (tmp_path / "failed" / "resumed.txt").read_text() == "2 8\n"

    code, stderr = _launch(script, tmp_path / "clean", fail_at=None)
    assert code == 0, stderr[-3000:]
    assert not (tmp_path / "clean" / "resumed.txt").exists()

    resumed = torch.load(tmp_path / "failed" / "final.pt", weights_only=True)
    uninterrupted = torch.load(tmp_path / "clean" / "final.pt", weights_only=True)
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in uninterrupted.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0)
