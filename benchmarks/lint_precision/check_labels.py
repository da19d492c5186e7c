"""Re-run ``torchplace lint`` on the labelled public repositories and compare with the labels.

``labels.csv`` (beside this script) holds every finding the linter gave on a handful of
well-known repositories at fixed commits, each labelled true or false by reading the code,
with the reason. This script extracts the ``*.py`` files of each repository at that commit
from a local git mirror, lints them, and prints the precision table of the README:

    .venv/bin/python benchmarks/lint_precision/check_labels.py --mirrors /work/.mirror

A mirror is a bare git directory at ``MIRRORS/<owner>+<name>/repo`` (what the project's
source-fetching tool produces) or ``MIRRORS/<owner>/<name>.git``; for example
``git clone --bare https://github.com/karpathy/nanoGPT MIRRORS/karpathy+nanoGPT/repo``.
Repositories that are not there are skipped with a message. The exit code is 1 when a
finding has no label or a labelled finding is gone (the labels need updating), else 0.
No third-party code is kept: files are extracted to a temporary folder.
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from torchplace.lint import lint_paths

__all__ = ["main"]

HERE = Path(__file__).resolve().parent
# every repository linted, at the commit labelled (those with no finding are here too)
REPOS: dict[str, str] = {
    "pytorch/examples": "77f55b912142e11fcfdf5b530231fb9c52f181e8",
    "karpathy/nanoGPT": "3adf61e154c3fe3fca428ad6bc3818b27a3b8291",
    "karpathy/minGPT": "37baab71b9abea1b76ab957409a1cc2fbfba8a26",
    "yunjey/pytorch-tutorial": "0500d3df5a2a8080ccfccbc00aca0eacc21818db",
    "huggingface/accelerate": "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83",
    "ultralytics/yolov5": "5081342f04fb287fc2e5f2b5a4e06752b7937b1c",
    "Lightning-AI/tutorials": "15817658a2d63afa338b9e1cd8454fb98d746fac",
}
# the part of a repository that was labelled (default: all of it)
SCOPES: dict[str, tuple[str, ...]] = {"huggingface/accelerate": ("examples", "setup.py")}


def _git_dir(mirrors: Path, repo: str) -> Path | None:
    owner, name = repo.split("/")
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / owner / f"{name}.git"):
        if candidate.is_dir():
            return candidate
    return None


def _extract(git_dir: Path, commit: str, scope: tuple[str, ...], dest: Path) -> None:
    """The ``*.py`` files of ``commit`` (a mirror may lack big data files: not asked for)."""
    git = ["git", "--git-dir", str(git_dir)]
    listing = subprocess.run(
        [*git, "ls-tree", "-r", "-z", "--name-only", commit, "--", *scope],
        capture_output=True,
        check=True,
    ).stdout.decode()
    files = [p for p in listing.split("\0") if p.endswith(".py")]
    archive = subprocess.run(
        [*git, "archive", "--format=tar", commit, "--", *files], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")]
        tar.extractall(dest, members=members, filter="data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--labels", type=Path, default=HERE / "labels.csv")
    args = parser.parse_args(argv)

    labels: dict[tuple[str, str, int, int, str], tuple[str, str]] = {}
    commits = dict(REPOS)
    with open(args.labels, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            key = (row["repo"], row["path"], int(row["line"]), int(row["column"]), row["code"])
            labels[key] = (row["verdict"], row["reason"])
            if commits.get(row["repo"]) != row["commit"]:
                parser.error(f"{row['repo']} is labelled at {row['commit']}, not in REPOS")

    table = []
    problems = 0
    per_rule: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for repo, commit in commits.items():
        git_dir = _git_dir(args.mirrors, repo)
        if git_dir is None:
            print(f"skip {repo}: no mirror under {args.mirrors}", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            try:
                _extract(git_dir, commit, SCOPES.get(repo, ()), Path(tmp))
            except subprocess.CalledProcessError as e:
                print(f"skip {repo}: cannot read {commit[:12]}: {e.stderr.decode()[:200]}")
                continue
            start = time.perf_counter()
            result = lint_paths([tmp], respect_gitignore=False)
            seconds = time.perf_counter() - start
            found = set()
            for finding in result.findings:
                rel = Path(finding.path).relative_to(tmp).as_posix()
                key = (repo, rel, finding.line, finding.col, finding.code)
                found.add(key)
                if key not in labels:
                    problems += 1
                    print(f"unlabelled: {repo} {rel}:{finding.line}:{finding.col} {finding.code}")
            for key in labels:
                if key[0] == repo and key not in found:
                    problems += 1
                    print(f"gone: {key[0]} {key[1]}:{key[2]}:{key[3]} {key[4]}")
            verdicts = [labels[k][0] for k in found if k in labels]
            for k in found:
                if k in labels:
                    per_rule[k[4]][labels[k][0]] += 1
            by_code = Counter(k[4] for k in found)
            table.append(
                (repo, commit, result.files, result.lines, by_code, verdicts.count("true"),
                 verdicts.count("false"), seconds)
            )  # fmt: skip

    if not table:
        print("no labelled repository found; nothing measured", file=sys.stderr)
        return 0
    print("| repository (commit) | files | lines | findings per rule | true | false |")
    print("|---|---|---|---|---|---|")
    totals: defaultdict[str, int] = defaultdict(int)
    for repo, commit, files, lines, by_code, true, false, _seconds in table:
        rules = ", ".join(f"{c} {n}" for c, n in sorted(by_code.items())) or "none"
        print(f"| {repo} ({commit[:7]}) | {files} | {lines:,} | {rules} | {true} | {false} |")
        for key, value in (("files", files), ("lines", lines), ("true", true), ("false", false)):
            totals[key] += value
        for code, n in by_code.items():
            totals[code] += n
    rules = ", ".join(f"{c} {totals[c]}" for c in sorted(k for k in totals if k.startswith("TPL")))
    print(
        f"| **total** | {totals['files']} | {totals['lines']:,} | {rules} | {totals['true']} | "
        f"{totals['false']} |"
    )
    judged = totals["true"] + totals["false"]
    if judged:
        print(f"\nprecision: {totals['true']}/{judged} = {totals['true'] / judged:.1%} true")
    print("\n| rule | findings | true | false |\n|---|---|---|---|")
    for code in sorted(per_rule):
        c = per_rule[code]
        print(f"| {code} | {c['true'] + c['false']} | {c['true']} | {c['false']} |")
    lint_seconds = sum(row[-1] for row in table)
    print(f"linted {totals['lines']:,} lines in {lint_seconds:.2f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
