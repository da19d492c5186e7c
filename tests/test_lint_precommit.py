"""``.pre-commit-hooks.yaml``: each hook's entry, run as pre-commit runs it (entry, then the
staged files), lints those files and fails the commit on a finding.

``pre-commit try-repo`` itself needs a network install of the package into a fresh
environment; docs/lint.md shows that run. Here the entry runs with this environment's
``torchplace`` console script, exactly as pre-commit composes the command line.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

HOOKS = Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml"


def _hooks() -> dict[str, dict[str, object]]:
    return {h["id"]: h for h in yaml.safe_load(HOOKS.read_text())}


def _run_entry(entry: str, files: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    program, *args = shlex.split(entry)
    script = Path(sys.executable).parent / program
    executable = str(script) if script.exists() else shutil.which(program)
    assert executable, f"{program} is not installed beside {sys.executable}"
    return subprocess.run(
        [executable, *args, *files], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_hooks_are_declared_as_pre_commit_expects() -> None:
    hooks = _hooks()
    assert set(hooks) == {"torchplace-lint", "torchplace-lint-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types"] == ["python"]
        assert str(hook["entry"]).startswith("torchplace lint")
        assert hook["name"] and hook["description"]


def test_the_lint_hook_fails_on_a_finding_and_passes_clean_files(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nstate = torch.load('ckpt.pt')\n")
    (tmp_path / "clean.py").write_text("import torch\nx = torch.zeros(3)\n")
    entry = str(_hooks()["torchplace-lint"]["entry"])
    done = _run_entry(entry, ["train.py", "clean.py"], tmp_path)
    assert done.returncode == 1
    assert done.stdout.startswith("train.py:2:9: TPL302 ")
    assert _run_entry(entry, ["clean.py"], tmp_path).returncode == 0


def test_the_fix_hook_rewrites_the_staged_file(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import torch\nz = torch.zeros(3).to(device)\n")
    done = _run_entry(str(_hooks()["torchplace-lint-fix"]["entry"]), ["m.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "m.py").read_text() == "import torch\nz = torch.zeros(3, device=device)\n"
