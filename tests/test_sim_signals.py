"""Ctrl-C and SIGTERM during ``torchplace sim``: real signals sent to a real command.

A terminal sends Ctrl-C (SIGINT) to the foreground process group: ``torchplace sim``
itself. It passes it on, so the simulated script gets a ``KeyboardInterrupt`` as under
``python script.py``; ``--find-max`` stops its search and shows what it measured.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

_READY = "READY-FOR-THE-SIGNAL"


def _sim_until_ready(
    args: list[str], signum: int, cwd: Path, marker: Path | None = None
) -> tuple[int, str, str]:
    """Run ``torchplace sim ARGS``; send ``signum`` once the script prints ``_READY`` (or,
    for a script whose output is not shown, once it has made the file ``marker``)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchplace", "sim", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )
    assert proc.stderr is not None
    err = []
    if marker is not None:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signum)
    else:
        for line in proc.stderr:  # the script's output goes to stderr with --json
            err.append(line)
            if _READY in line:
                proc.send_signal(signum)
                break
    out, rest = proc.communicate(timeout=120)
    return proc.returncode, out, "".join(err) + rest


def _waiting_script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "train.py"
    ready = f"print({_READY!r}, file=sys.stderr, flush=True)"
    script.write_text(
        "import sys, time, torch\nx = torch.ones(1024, device='cuda')\n"
        + body.replace("READY", ready)
    )
    return script


def test_ctrl_c_reaches_the_script_as_keyboard_interrupt(tmp_path: Path) -> None:
    script = _waiting_script(
        tmp_path,
        "try:\n"
        "    READY\n"  # inside the try: the signal may come while it prints
        "    while True:\n"
        "        time.sleep(0.05)\n"
        "except KeyboardInterrupt:\n"
        "    print('the script saved its work', file=sys.stderr)\n"
        "    sys.exit(7)\n",
    )
    rc, out, err = _sim_until_ready(["--json", str(script)], signal.SIGINT, tmp_path)
    assert rc == 7, err  # the script's own exit code
    assert "the script saved its work" in err
    report = json.loads(out)
    assert report["interrupted"] == "SIGINT" and report["exit_code"] == 7
    assert report["devices"][0]["peak_allocated_bytes"] == 4096  # what it did until then


def test_ctrl_c_not_handled_exits_130_and_says_interrupted(tmp_path: Path) -> None:
    script = _waiting_script(tmp_path, "READY\nwhile True:\n    time.sleep(0.05)\n")
    rc, out, err = _sim_until_ready([str(script)], signal.SIGINT, tmp_path)
    assert rc == 130, err
    assert "KeyboardInterrupt" in err and "Traceback" in err  # as Python prints it
    assert "signal SIGTERM" not in out + err
    text = " ".join(out.split())  # as one line, however the terminal wraps it
    # where the script was: the loop (line 5), or just after printing that it was ready
    assert "interrupted (Ctrl-C)" in text and re.search(r"train\.py:[345]\b", text)


def test_find_max_interrupted_stops_and_shows_what_it_measured(tmp_path: Path) -> None:
    script = tmp_path / "sized.py"
    marker = tmp_path / "at-4"
    script.write_text(
        "import pathlib, sys, time, torch\n"
        "n = int(sys.argv[1])\n"
        "x = torch.empty(n, 1024**3, dtype=torch.uint8, device='cuda')\n"
        f"if n == 4:\n    pathlib.Path({str(marker)!r}).touch()\n"
        "    time.sleep(120)\n"
    )
    args = ["--values", "placeholder", "--find-max", "N", str(script), "{N}"]
    rc, out, err = _sim_until_ready(args, signal.SIGINT, tmp_path, marker)
    assert rc == 130, err
    text = " ".join(out.split())
    assert "the search stopped, interrupted (Ctrl-C, SIGINT) while trying {N} = 4" in text
    assert "the largest {N} that fits is 2 — a lower bound, not the answer" in text
    rows = [line.split()[0] for line in out.splitlines() if line.split()[-1:] == ["fits"]]
    assert rows == ["1", "2"]  # the interrupted size is not recorded as measured

    marker.unlink()
    rc, out, err = _sim_until_ready(["--json", *args], signal.SIGTERM, tmp_path, marker)
    assert rc == 143, err
    result = json.loads(out)["find_max"]["h100-sxm-80gb"]
    assert result["stopped"] == "interrupted (SIGTERM) while trying {N} = 4"
    assert [p["size"] for p in result["probes"]] == [1, 2] and result["largest"] == 2
