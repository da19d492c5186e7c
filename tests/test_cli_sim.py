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
    assert "Traceback" in r.stderr and "torchplace/sim/emulation/_modes.py" not in r.stderr


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


@pytest.mark.parametrize(
    ("args", "error", "hint"),
    [
        (["mypkg"], "mypkg is a folder, not a script", "torchplace sim -m mypkg"),
        (["--", "python", "-m", "mypkg.train"], "no such script: 'python'",
         "leave out 'python': torchplace sim -m mypkg.train"),
        (["mypkg.train"], "no such script: 'mypkg.train'", "torchplace sim -m mypkg.train"),
        (["-m", "mypkg.nothing"], "no module named 'mypkg.nothing'", "drop -m"),
    ],
)  # fmt: skip
def test_what_is_not_a_script_gets_a_hint(
    tmp_path: Path, args: list[str], error: str, hint: str
) -> None:
    (tmp_path / "mypkg").mkdir()
    for name in ("__init__", "__main__", "train"):
        (tmp_path / "mypkg" / f"{name}.py").write_text("")
    r = sim(*args, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    error_line, hint_line = r.stderr.splitlines()[:2]
    assert error_line.startswith("error: ") and error in error_line
    assert hint_line.startswith("hint: ") and hint in hint_line


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


@pytest.mark.parametrize(("work", "event"), [("sleep", "waited 2 s without working"),
                                            ("busy", "the script ended")])  # fmt: skip
def test_auto_does_not_hold_the_output_of_a_waiting_script(
    tmp_path: Path, work: str, event: str
) -> None:
    """A script that waits (for input, a lock, a sleep) before any event that decides gets
    real values once it has waited 2 s idle: its output is not held back meanwhile. A busy
    one (host work) is still being looked at."""
    script = tmp_path / "wait.py"
    script.write_text(
        "import sys, time, torch\n"
        "x = torch.ones(8, device='cuda')\n"
        "print('before', flush=True)\n"
        "end = time.monotonic() + 3\n"
        f"while time.monotonic() < end:\n    {'time.sleep(0.1)' if work == 'sleep' else 'pass'}\n"
        "print('after', flush=True)\n"
    )
    r = sim("--json", str(script))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("before") == 1 and r.stderr.count("after") == 1
    decision = json.loads(r.stdout)["values_decision"]
    assert decision["ran"] == "real" and event in decision["decided_at"]["event"]


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


def test_saved_files_go_where_the_script_says_and_never_replace_a_users_file(
    tmp_path: Path,
) -> None:
    """docs/sim.md, "Files the script saves": train, then sample, each under sim."""
    (tmp_path / "train.py").write_text(
        "import sys, torch\n"
        "model = torch.nn.Linear(2, 2).cuda()\n"
        "for epoch in range(2):\n"
        "    for path in sys.argv[1:]:\n"
        "        torch.save({'model': model.state_dict(), 'epoch': epoch}, path)\n"
    )
    (tmp_path / "sample.py").write_text(
        "import torch\n"
        "state = torch.load('ckpt.pt')\n"
        "assert state['epoch'] == 1 and state['model']['weight'].is_cuda\n"
        "print('sampled from epoch', state['epoch'])\n"
    )
    first = sim("--json", "train.py", "ckpt.pt", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    ckpt = tmp_path / "ckpt.pt"
    assert [(f["path"], f["written_to"]) for f in json.loads(first.stdout)["files"]] == [
        (str(ckpt), str(ckpt))
    ]
    import torch

    saved = torch.load(ckpt, map_location="cpu")  # a real file, as a GPU run writes it
    assert saved["epoch"] == 1 and set(saved["model"]) == {"weight", "bias"}
    sampled = sim("sample.py", cwd=tmp_path)
    assert sampled.returncode == 0 and "sampled from epoch 1" in sampled.stdout, sampled.stderr

    before = ckpt.read_bytes()  # now the user's file: this next run did not make it
    again = sim("train.py", "ckpt.pt", "new.pt", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert ckpt.read_bytes() == before and (tmp_path / "new.pt").exists()
    text = " ".join(again.stdout.split())
    assert "ckpt.pt → " in text and "a simulation never replaces it" in text
    assert "new.pt: written where the script said" in text


def test_placeholder_files_stay_out_of_the_users_folders_unless_asked(tmp_path: Path) -> None:
    import torch

    from torchplace.sim import simulate

    path = tmp_path / "ckpt.pt"
    with simulate("H100", values="placeholder") as report:
        torch.save(torch.nn.Linear(2, 2).cuda().state_dict(), path)
        assert set(torch.load(path)) == {"weight", "bias"}  # the run reads its copy back
    assert not path.exists() and report.files[0]["written_to"] != str(path)
    path.write_bytes(b"the user's checkpoint")
    with simulate("H100", write_files=True):  # --write-files: in place, whatever is there
        torch.save(torch.nn.Linear(2, 2).cuda().state_dict(), path)
    assert set(torch.load(path, map_location="cpu")) == {"weight", "bias"}


def _one_line(text: str) -> str:
    return " ".join(text.split())  # however the terminal wrapped it


@pytest.mark.parametrize(
    ("source", "args", "verdict"),
    [
        (
            "import sys, torch\nx = torch.ones(8, device='cuda')\nsys.exit(3)\n",
            [],
            "verdict: the script did not finish: exit code 3 at train.py:3",
        ),
        (
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr')\n"
            "p.parse_args()\n",
            ["--html", "report.html"],
            "verdict: the script did not finish: exit code 2 at train.py:4 last output: "
            "train.py: error: unrecognized arguments: --html report.html hint: torchplace "
            "options go before the script: torchplace sim --html report.html train.py",
        ),
        ("", [], "verdict: nothing to fit: the script put nothing on a simulated GPU"),
    ],
    ids=["sys.exit(3)", "argparse error", "empty script"],
)
def test_a_run_that_did_not_finish_is_never_called_a_fit(
    tmp_path: Path, source: str, args: list[str], verdict: str
) -> None:
    (tmp_path / "train.py").write_text(source)
    r = sim("train.py", *args, cwd=tmp_path)
    out = _one_line(r.stdout)
    assert verdict in out, r.stdout
    assert "fits" not in out
    assert not (tmp_path / "report.html").exists()


def test_a_missing_module_is_not_a_fit(tmp_path: Path) -> None:
    r = sim("--json", "-m", "no_such_module_here", cwd=tmp_path)
    assert r.returncode != 0
    assert "fits" not in r.stdout and "no_such_module_here" in r.stdout + r.stderr


def test_ranks_of_a_script_that_is_not_distributed_say_so(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\nx = torch.ones(1024, 1024, device='cuda')\n"  # 4 MiB on cuda:0
    )
    r = sim("--nproc-per-node", "2", "train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = _one_line(r.stdout)
    assert "verdict: not distributed: the script never calls torch.distributed." in text
    assert "put its tensors on cuda:0" in text
    rows = [line for line in r.stdout.splitlines() if line.split()[:1] == ["1"]]
    assert rows and "4.0 MiB" in rows[0] and "fits" not in rows[0]  # not a 0 B "fits"


def test_a_torchrun_script_run_on_gpus_is_told_about_nproc_per_node(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n"
    )
    r = sim("--gpus", "2", "train.py", "--lr", "3", cwd=tmp_path)
    assert r.returncode == 1
    assert "environment variable RANK expected" in _one_line(r.stdout)
    assert "hint: this script expects torchrun to start it" in _one_line(r.stdout)
    assert "torchplace sim --nproc-per-node 2 train.py --lr 3" in _one_line(r.stdout)
