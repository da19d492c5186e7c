"""Recall on realistic files with planted mistakes (issue 25: at least 90%), and nothing at
all on their corrected twins (benchmarks/lint_precision/recall.py prints the table)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _recall_module():  # type: ignore[no-untyped-def]
    path = ROOT / "benchmarks" / "lint_precision" / "recall.py"
    spec = importlib.util.spec_from_file_location("lint_recall", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_recall_is_at_least_90_percent_and_the_twins_are_clean() -> None:
    report = _recall_module().measure()
    assert report.files >= 9
    assert len(report.found) + len(report.missed) >= 30
    assert report.recall >= 0.9, report.missed
    assert report.on_twins == []
    assert report.unplanted == []


def test_each_issue_25_shape_is_planted_and_found() -> None:
    found = {(name, code) for name, _line, code in _recall_module().measure().found}
    assert ("pretrain_mae.py", "TPL101") in found  # backward inside loss_scaler(...)
    assert ("pretrain_mae.py", "TPL205") in found  # a loader behind metric_logger.log_every
    assert ("pretrain_mae.py", "TPL302") in found  # torch.load(path, **kwargs)
    assert ("lm_finetune.py", "TPL101") in found  # .item() in the else of a periodic test
    assert ("serve.py", "TPL105") in found  # a timing around unsynchronised GPU work
