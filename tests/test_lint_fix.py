"""``--fix``: each fixable rule's rewrite, compared before and after, then re-linted clean."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import run_torchplace
from torchplace.lint import RULES, fix_source, lint_source

CASES = {
    "TPL105": (
        "import time\nimport torch\n\nx = torch.randn(64, 64, device='cuda')\n"
        "def bench():\n    t0 = time.perf_counter()\n    y = x @ x\n"
        "    return time.perf_counter() - t0\n",
        "import time\nimport torch\n\nx = torch.randn(64, 64, device='cuda')\n"
        "def bench():\n    t0 = time.perf_counter()\n    y = x @ x\n"
        "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
        "    return time.perf_counter() - t0\n",
    ),
    "TPL206": (
        "import torch as th\nh = th.zeros(2, 3).to(device)\no = th.ones(4,).cuda()\n"
        "a = th.arange(\n    10,\n).to(x.device, non_blocking=True)\n",
        'import torch as th\nh = th.zeros(2, 3, device=device)\no = th.ones(4, device="cuda",)\n'
        "a = th.arange(\n    10, device=x.device,\n)\n",
    ),
    "TPL303": (
        "import torch\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
        "    total += loss\n    history.append(loss)\n",
        "import torch\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
        "    total += loss.detach()\n    history.append(loss.detach())\n",
    ),
    "TPL402": (
        "import torch\nwith torch.cuda.amp.autocast(dtype=torch.bfloat16):\n    pass\n"
        "s = torch.cuda.amp.GradScaler()\nt = torch.cuda.amp.GradScaler(2.0**10)\n"
        "@torch.cuda.amp.custom_fwd\ndef f(ctx, x):\n    return x\n"
        "@torch.cuda.amp.custom_bwd()\ndef g(ctx, x):\n    return x\n",
        'import torch\nwith torch.amp.autocast("cuda", dtype=torch.bfloat16):\n    pass\n'
        's = torch.amp.GradScaler("cuda")\nt = torch.amp.GradScaler("cuda", 2.0**10)\n'
        '@torch.amp.custom_fwd(device_type="cuda")\ndef f(ctx, x):\n    return x\n'
        '@torch.amp.custom_bwd(device_type="cuda")\ndef g(ctx, x):\n    return x\n',
    ),
}


def test_every_fixable_rule_has_a_case() -> None:
    assert set(CASES) == {code for code, rule in RULES.items() if rule.fixable}


@pytest.mark.parametrize("code", sorted(CASES))
def test_fix_before_after_and_clean(code: str) -> None:
    before, after = CASES[code]
    assert any(f.code == code for f in lint_source(before, select=[code]))
    fixed_text, fixed, remaining = fix_source(before, select=[code])
    assert fixed_text == after
    assert fixed >= 1
    assert remaining == []
    assert lint_source(fixed_text, select=[code]) == []  # re-linted clean
    ast.parse(fixed_text)


@pytest.mark.parametrize(
    ("code", "source"),
    [
        (
            "TPL206",
            "import torch\nfor _ in s:\n    r = torch.randn(3).to(device)\n",
        ),  # values differ
        ("TPL206", "import torch\nl = torch.linspace(0, 1, 5).to(device)\n"),  # rounding
        ("TPL206", "import torch\na = torch.arange(0, 1, step=0.1).to(device)\n"),  # rounding
        ("TPL206", "import torch\nz = torch.zeros(3).to(device, torch.float16)\n"),
        ("TPL402", "import torch\nwith torch.cuda.amp.autocast(True):\n    pass\n"),  # order
        ("TPL402", "from torch.cuda.amp import autocast\nwith autocast():\n    pass\n"),
        (
            "TPL105",
            "import time\nimport torch\nx = torch.ones(2, device='mps')\n"
            "t0 = time.time()\ny = x @ x\nd = time.time() - t0\n",
        ),  # not CUDA
    ],
)
def test_fixes_that_could_change_behaviour_are_not_offered(code: str, source: str) -> None:
    findings = lint_source(source, select=[code])
    assert findings and all(f.fix is None for f in findings)
    assert fix_source(source, select=[code])[:2] == (source, 0)


def test_cli_fix_rewrites_in_place_keeps_line_endings_and_reports_the_rest(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_bytes(
        b"import torch\r\nz = torch.zeros(3).to(device)\r\nm = torch.load('ckpt.pt')\r\n"
    )
    done = run_torchplace("lint", "--fix", str(script), cwd=tmp_path)
    assert done.returncode == 1  # TPL302 has no fix and is still there
    assert script.read_bytes() == (
        b"import torch\r\nz = torch.zeros(3, device=device)\r\nm = torch.load('ckpt.pt')\r\n"
    )
    assert "TPL302" in done.stdout and "TPL206" not in done.stdout
    assert "Fixed 1." in done.stderr

    clean = tmp_path / "clean.py"
    clean.write_text("import torch\nz = torch.zeros(3).to(device)\n")
    done = run_torchplace("lint", "--fix", str(clean), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert clean.read_text() == "import torch\nz = torch.zeros(3, device=device)\n"


def test_the_sync_guard_a_fix_adds_does_not_count_as_choosing_a_device() -> None:
    source = (
        "import time\nimport torch\nx = torch.randn(8, 8).cuda()\n"
        "t0 = time.time()\ny = x @ x\nd = time.time() - t0\n"
    )
    fixed_text, fixed, remaining = fix_source(source, select=["TPL105", "TPL203"])
    assert fixed == 1 and "torch.cuda.synchronize()" in fixed_text
    assert [f.code for f in remaining] == ["TPL203"]  # .cuda() still crashes without CUDA
