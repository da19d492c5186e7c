"""Recall of ``torchplace lint`` on realistic files with planted mistakes, and their twins.

``tests/lint_fixtures/recall/NAME.py`` is a realistic program (a pre-training engine, a GAN
script, a model library, an inference worker, a legacy trainer, a fine-tuning loop, a test
module, a Lightning module, a reinforcement-learning agent) with mistakes planted on the
lines that end with ``# planted: CODE [CODE]``; ``NAME_fixed.py`` is the same program
corrected. Recall is the planted (line, rule) pairs that the lint finds, with every rule
on (``--select ALL``), over all planted pairs; a finding on a twin is a false positive
and fails the run, and so does an unplanted finding in a planted file (it must be planted,
or it is a false positive too).

    .venv/bin/python benchmarks/lint_precision/recall.py
"""

from __future__ import annotations

import argparse
import io
import sys
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from torchplace.lint import lint_file

__all__ = ["RecallReport", "main", "measure"]

FOLDER = Path(__file__).resolve().parents[2] / "tests" / "lint_fixtures" / "recall"


@dataclass
class RecallReport:
    """What the measure found: planted pairs found and missed, and false positives."""

    found: list[tuple[str, int, str]] = field(default_factory=list)
    missed: list[tuple[str, int, str]] = field(default_factory=list)
    unplanted: list[tuple[str, int, str]] = field(default_factory=list)  # in planted files
    on_twins: list[tuple[str, int, str]] = field(default_factory=list)
    files: int = 0

    @property
    def recall(self) -> float:
        planted = len(self.found) + len(self.missed)
        return len(self.found) / planted if planted else 1.0


def _planted(path: Path) -> set[tuple[int, str]]:
    marks = set()
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.COMMENT and "planted:" in tok.string:
            for code in tok.string.split("planted:", 1)[1].split():
                marks.add((tok.start[0], code))
    return marks


def measure(folder: Path = FOLDER) -> RecallReport:
    """Lint every planted file and its twin with every rule on."""
    report = RecallReport()
    for path in sorted(folder.glob("*.py")):
        if path.stem.endswith("_fixed"):
            continue
        twin = path.with_name(f"{path.stem}_fixed.py")
        if not twin.exists():
            raise SystemExit(f"{path} has no corrected twin {twin.name}")
        report.files += 1
        planted = _planted(path)
        found = {(f.line, f.code) for f in lint_file(path, select=["ALL"])}
        for line, code in sorted(planted):
            (report.found if (line, code) in found else report.missed).append(
                (path.name, line, code)
            )
        report.unplanted += [(path.name, line, code) for line, code in sorted(found - planted)]
        report.on_twins += [(twin.name, f.line, f.code) for f in lint_file(twin, select=["ALL"])]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=FOLDER)
    args = parser.parse_args(argv)
    report = measure(args.folder)
    planted = Counter(code for *_, code in report.found + report.missed)
    found = Counter(code for *_, code in report.found)
    print("| rule | planted | found |\n|---|---|---|")
    for code in sorted(planted):
        print(f"| {code} | {planted[code]} | {found[code]} |")
    total = len(report.found) + len(report.missed)
    print(f"\n{report.files} files: recall {len(report.found)}/{total} = {report.recall:.1%}")
    for name, line, code in report.missed:
        print(f"missed: {name}:{line} {code}")
    for name, line, code in report.unplanted:
        print(f"not planted: {name}:{line} {code}")
    for name, line, code in report.on_twins:
        print(f"on a corrected twin: {name}:{line} {code}")
    print(
        f"false positives: {len(report.unplanted)} in planted files, "
        f"{len(report.on_twins)} on the corrected twins"
    )
    return 1 if report.on_twins or report.unplanted else 0


if __name__ == "__main__":
    sys.exit(main())
