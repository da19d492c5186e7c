"""benchmarks/bench_lint.py runs end to end on a small folder and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_lint_prints_the_three_rows(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(3).to(device)\n" * 50)
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_lint.py"), str(tmp_path), "--rounds", "1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 files, 100 lines, 50 findings by default (50 with every rule)" in done.stdout
    for row in ("| ast.parse only |", "| torchplace lint (rules on by default) |",
                "| torchplace lint --select ALL |"):  # fmt: skip
        assert row in done.stdout
    assert "goal 10,000 lines/s per core" in done.stdout
