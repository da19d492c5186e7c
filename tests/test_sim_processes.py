"""Python processes a simulated script starts are simulated too, each with its own section.

``torchplace sim launch.py`` where ``launch.py`` runs ``subprocess.run([sys.executable,
"train.py"])``, ``python -c``, ``python -m``, a shell that starts Python, and a program
that is not Python: every Python child that imports torch sees the simulated GPUs and
reports; the others are listed as not simulated.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import run_torchplace
from torchplace.sim.report import SimReport
from torchplace.sim.summary import verdict


def test_python_children_are_simulated_and_others_are_named(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import os, sys, torch\n"
        "assert torch.cuda.is_available() and torch.cuda.device_count() == 2\n"
        "x = torch.ones(int(sys.argv[1]), 1024, 1024, dtype=torch.uint8, device='cuda:1')\n"
        "print('config', os.environ['TORCHPLACE_SIM_PROCESSES'], flush=True)\n"
    )
    (tmp_path / "bigmod.py").write_text(
        "import torch\ntorch.empty(200 * 1024**3, dtype=torch.uint8, device='cuda')\n"
    )
    (tmp_path / "launch.py").write_text(
        "import subprocess, sys\n"
        "py = sys.executable\n"
        "subprocess.run([py, 'train.py', '3'], check=True)\n"
        "subprocess.run([py, '-c', 'import torch; torch.ones(4, device=\"cuda\")'], check=True)\n"
        "subprocess.run(['sh', '-c', f'{py} train.py 5'], check=True)\n"
        "subprocess.run([py, '-m', 'bigmod'])\n"
        "subprocess.run([py, '-c', 'print(42)'], check=True)\n"
    )
    r = run_torchplace("sim", "--json", "--gpus", "2", "launch.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    by_argv = {" ".join(p["argv"][1:]) if isinstance(p["argv"], list) else p["argv"]: p
               for p in report["processes"]}  # fmt: skip
    peaks = {k: [d["peak_allocated_bytes"] for d in p["report"]["devices"]]
             for k, p in by_argv.items() if p.get("report")}  # fmt: skip
    assert peaks["train.py 3"] == [0, 3 * 2**20]  # its own section, on simulated cuda:1
    assert peaks["train.py 5"] == [0, 5 * 2**20]  # started by a shell: simulated too
    assert peaks['-c import torch; torch.ones(4, device="cuda")'] == [512, 0]
    oom = by_argv["-m bigmod"]
    assert oom["exit_code"] == 1 and oom["report"]["oom"]["line"] == 2
    assert by_argv["-c print(42)"]["reason"] == "no torch: nothing to simulate"
    shell = next(p for p in report["processes"] if p["argv"][0] == "sh")
    assert shell["simulated"] is False and shell["reason"].startswith("not simulated: not Python")
    # the verdict of the whole run names the child that ran out of memory
    v = verdict(SimReport.from_dict(report))
    assert v.ok is False and v.text.startswith("in python") and "-m bigmod" in v.text
    assert "out of memory on cuda:0 at " in v.text and "bigmod.py:2 (it asked for 200" in v.text
    # the folder the children reported to is gone
    config = next(line.split()[1] for line in r.stderr.splitlines() if line.startswith("config"))
    assert not os.path.exists(os.path.dirname(config))
