"""``torchplace sim`` end to end, through ``python -m torchplace`` in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import run_torchplace


def sim(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_torchplace("sim", *args, cwd=cwd)


def test_builtin_example_json_schema() -> None:
    r = sim("--json", "--gpu", "a100-80gb")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)  # the script's own prints went to stderr
    assert "Using cuda (NVIDIA A100-SXM4-80GB)" in r.stderr
    assert report["schema_version"] == 1
    assert report["gpu"]["key"] == "a100-sxm-80gb"
    (dev,) = report["devices"]
    assert {
        "index",
        "name",
        "capacity_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
    } <= set(dev)
    assert dev["peak_reserved_bytes"] >= dev["peak_allocated_bytes"] > 0
    assert dev["estimated_step_seconds"] > 0
    assert report["oom"] is None and report["error"] is None and report["exit_code"] == 0
    assert set(report["transfers"]) == {"h2d", "d2h", "d2d"}
    assert report["transfers"]["h2d"]["count"] > 0
    sync = next(s for s in report["syncs"] if s["kind"] == "item")
    assert sync["file"].endswith("example.py") and sync["count"] == 8


def test_device_bug_is_reported_with_file_and_line() -> None:
    r = sim("--json", "-m", "torchplace.sim.example", "--forget-labels", "--steps", "2")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    err = report["error"]
    assert err["type"] == "RuntimeError"
    assert "Expected all tensors to be on the same device" in err["message"]
    assert err["file"].endswith("example.py") and err["line"] > 0
    assert "Traceback" in r.stderr and "torchplace/sim/_modes.py" not in r.stderr


def test_script_exit_code_args_and_oom_handling(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        "assert sys.argv[1:] == ['--flag', 'x']\n"
        "try:\n"
        "    torch.empty(30 * 1024**3, dtype=torch.uint8, device='cuda')\n"
        "except torch.OutOfMemoryError as e:\n"
        "    print('caught', str(e).splitlines()[0][:40])\n"
        "    sys.exit(3)\n"
    )
    r = sim("--json", "--gpu", "T4", str(script), "--flag", "x")
    assert r.returncode == 3, r.stderr
    report = json.loads(r.stdout)
    assert report["exit_code"] == 3
    assert report["oom"]["device"] == 0 and report["oom"]["line"] == 4
    assert report["oom"]["requested_bytes"] >= 30 * 1024**3
    assert "caught CUDA out of memory. Tried to allocate" in r.stderr


def test_parent_survives_an_aborting_child(tmp_path: Path) -> None:
    script = tmp_path / "abort.py"
    script.write_text("import os\nos.abort()\n")
    r = sim(str(script))
    assert r.returncode != 0
    assert "died (SIGABRT)" in r.stdout


def test_table_output_and_list_gpus() -> None:
    r = sim("--gpus", "2", "--memory", "22.5GiB", "-m", "torchplace.sim.example", "--steps", "1")
    assert r.returncode == 0, r.stderr
    assert "2 × simulated" in r.stdout and "cuda:1" in r.stdout and "22.50 GiB" in r.stdout
    listed = sim("--list-gpus")
    assert (
        listed.returncode == 0 and "h100-sxm-80gb" in listed.stdout and "Tesla T4" in listed.stdout
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "H1000"], "H100"),
        (["--gpus", "0"], "--gpus must be at least 1"),
        (["--memory", "lots"], "lots"),
        (["no_such_script.py"], "no such script"),
        (["--timeout", "0"], "--timeout must be a positive number"),
        (["--host-memory-limit", "lots"], "lots"),
    ],
)
def test_bad_input(args: list[str], message: str) -> None:
    r = sim(*args)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and message in r.stderr
    assert "Traceback" not in r.stderr


def test_torch_compile_warns_and_runs_eagerly(tmp_path: Path) -> None:
    script = tmp_path / "compiled.py"
    script.write_text(
        "import torch\n"
        "m = torch.compile(torch.nn.Linear(4, 4).cuda())\n"
        "m(torch.ones(2, 4, device='cuda'))\n"
    )
    r = sim(str(script))
    assert r.returncode == 0, r.stderr
    assert "torch.compile is not simulated" in r.stderr


def test_unknown_values_mode_is_a_usage_error() -> None:
    r = sim("--values", "fake")
    assert r.returncode == 2
    assert "invalid choice: 'fake'" in r.stderr and "Traceback" not in r.stderr


def test_syntax_error_is_reported_as_python_does(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import torch\nx = torch.ones(3\nprint(x)\n")
    r = sim(str(script))
    assert r.returncode == 1
    assert f'File "{script}", line 2' in r.stderr
    assert "SyntaxError: '(' was never closed" in r.stderr and "^" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""  # no report of a run that never ran


def test_timeout_stops_a_hanging_script_and_reports(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(
        "import time, torch\nx = torch.ones(3, device='cuda')\nwhile True:\n    time.sleep(0.05)\n"
    )
    r = sim("--json", "--timeout", "15", str(script))
    assert r.returncode != 0
    report = json.loads(r.stdout)
    assert report["error"]["type"] == "Timeout"
    assert "stopped after 15 s" in report["error"]["message"]
    assert report["devices"][0]["peak_allocated_bytes"] == 512  # what it did before


def test_sigterm_stops_the_script_and_its_children(tmp_path: Path) -> None:
    script = tmp_path / "forever.py"
    marker = tmp_path / "child.pid"
    script.write_text(
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "while True:\n    time.sleep(0.05)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchplace", "sim", "--json", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    report = json.loads(out)
    assert report["error"]["type"] == "Terminated"
    grandchild = int(marker.read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)  # the script's own child was stopped too


# An outer product of two 100,000-element vectors: 37.25 GiB, within an H100, beyond this
# host (and beyond a 64 MiB --host-memory-limit); computed on the host, the run would die.
_OUTER = (
    "import sys, torch\n"
    "print('start', flush=True)\n"
    "open(sys.argv[1], 'a').write('written\\n')\n"
    "a = torch.randn(100_000, 1, device='cuda')\n"
    "c = a @ a.T\n"
    "print('sum', c.sum().item())\n"
)


def test_auto_goes_on_with_placeholders_in_one_run(tmp_path: Path) -> None:
    """--values auto (the default): real values until the line that would not fit the
    host, placeholders from there, in the same run: the script's output and its file are
    made once."""
    script, log = tmp_path / "big.py", tmp_path / "log.txt"
    script.write_text(_OUTER)
    r = sim("--json", "--host-memory-limit", "64MiB", str(script), str(log))
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["values"] == "placeholder" and report["error"] is None
    decision = report["values_decision"]
    assert decision["requested"] == "auto" and decision["ran"] == "placeholder"
    assert decision["placeholder_from"] == {"file": str(script), "line": 5}
    assert "aten.mm would take 37.25 GiB of host memory" in decision["reason"]
    assert report["notes"][0]["text"].startswith(f"values: placeholder from {script}:5 on")
    assert r.stderr.count("start") == 1 and "sum 0.0" in r.stderr
    assert log.read_text() == "written\n"


_SIDE_EFFECTS = """\
import subprocess, sys, torch
from torch import nn
print("one", flush=True)
print("two (stderr)", file=sys.stderr, flush=True)
model = nn.Linear(1024, 1024).cuda()  # 4 MiB of weights
if "write-first" in sys.argv:
    open(sys.argv[1], "a").write("early\\n")
if "process-first" in sys.argv:
    subprocess.run([sys.executable, "-c", "print('from a child', flush=True)"])
opt = torch.optim.SGD(model.parameters())
model(torch.ones(4, 1024, device="cuda")).sum().backward()
opt.step()
print("loss", model(torch.ones(1, 1024, device="cuda")).sum().item())
open(sys.argv[1], "a").write("late\\n")
"""


@pytest.mark.parametrize(
    ("limit", "order", "ran", "event", "log"),
    [
        # the scout passes the limit at the model's line: it is the run, with placeholders
        ("1MiB", "write-first", "placeholder", None, "early\nlate\n"),
        # the scout stops before the file is written / the process starts: real values
        ("1GiB", "write-first", "real", "(open)", "early\nlate\n"),
        ("1GiB", "process-first", "real", "(subprocess.Popen)", "late\n"),
        # nothing outside the process before the first step: real values from there
        ("1GiB", "none", "real", "the first optimizer step ended", "late\n"),
    ],
)
def test_auto_runs_the_script_once(
    tmp_path: Path, limit: str, order: str, ran: str, event: str | None, log: str
) -> None:
    """--values auto decides before paying for both (torchplace.sim._values): whichever
    it decides, the script's output appears once, in order, and its files are written once."""
    script, path = tmp_path / "effects.py", tmp_path / "log.txt"
    script.write_text(_SIDE_EFFECTS)
    r = sim("--json", "--host-memory-limit", limit, str(script), str(path), order)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if not x.startswith("torchplace sim")]
    child = ["from a child"] if order == "process-first" else []
    loss = "loss 0.0" if ran == "placeholder" else lines[-1]
    assert lines == ["one", "two (stderr)", *child, loss] and loss.startswith("loss ")
    assert path.read_text() == log
    decision = json.loads(r.stdout)["values_decision"]
    assert decision["ran"] == ran and decision["requested"] == "auto"
    if event is None:
        assert decision["reason"].startswith(f"placeholder values from the start, because at "
                                             f"{script}:5 real values would take 4.0 MiB")  # fmt: skip
    else:
        assert event in decision["decided_at"]["event"]


def test_real_values_stop_with_host_memory_error_and_a_report(tmp_path: Path) -> None:
    script, log = tmp_path / "big.py", tmp_path / "log.txt"
    script.write_text(_OUTER)
    r = sim("--json", "--values", "real", "--host-memory-limit", "64MiB", str(script), str(log))
    assert r.returncode == 1  # the script's error, not a signal
    error = json.loads(r.stdout)["error"]
    assert error["type"] == "HostMemoryError" and (error["file"], error["line"]) == (
        str(script),
        5,
    )
    assert "aten.mm would take 37.25 GiB" in error["message"]


def test_an_op_larger_than_the_gpu_is_cudas_out_of_memory_at_the_line(tmp_path: Path) -> None:
    script, log = tmp_path / "big.py", tmp_path / "log.txt"
    script.write_text(_OUTER)
    r = sim("--json", "--gpu", "T4", str(script), str(log))  # 37 GiB: no T4 holds it
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["error"]["type"] == "OutOfMemoryError"
    assert (report["oom"]["file"], report["oom"]["line"]) == (str(script), 5)
    assert "CUDA out of memory. Tried to allocate 37.25 GiB" in report["error"]["message"]
    assert report["values"] == "real"


def test_write_files_writes_in_place(tmp_path: Path) -> None:
    script = tmp_path / "save.py"
    target = tmp_path / "ckpt.pt"
    script.write_text(
        f"import torch\ntorch.save(torch.nn.Linear(2, 2).cuda().state_dict(), {str(target)!r})\n"
    )
    redirected = json.loads(sim("--json", str(script)).stdout)
    assert not target.exists() and redirected["files"][0]["path"] == str(target)
    r = sim("--json", "--write-files", str(script))
    assert r.returncode == 0 and target.exists() and json.loads(r.stdout)["files"] == []
    import torch

    loaded = torch.load(target, map_location="cpu")  # a real file, written as a GPU run would
    assert set(loaded) == {"weight", "bias"}
