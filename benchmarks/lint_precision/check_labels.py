"""Re-run ``torchplace lint`` on the labelled public repositories and compare with the labels.

``repos.csv`` (beside this script) lists every repository linted, at a fixed commit, with
its split: ``tune`` (the rules were tuned while looking at its findings) or ``heldout``
(labelled once, after tuning ended, and never looked at before). ``labels.csv`` holds
every finding the linter gives there with every rule on (opt-in rules too), each
labelled ``actionable`` or ``not`` by reading it in its code, with a one-line reason
(README.md in this folder says how). This script extracts the ``*.py`` files of each
repository at its commit from a local git mirror, lints them, and prints the precision
tables of docs/lint.md, per split and per rule:

    .venv/bin/python benchmarks/lint_precision/check_labels.py --mirrors /work/.mirror

A mirror is a bare git directory at ``MIRRORS/<owner>+<name>/repo`` (what the project's
source-fetching tool produces) or ``MIRRORS/<owner>/<name>.git``; for example
``git clone --bare https://github.com/karpathy/nanoGPT MIRRORS/karpathy+nanoGPT/repo``.
Repositories that are not there are skipped with a message. ``--todo FILE`` writes the
unlabelled findings as CSV rows with an empty verdict, to be read and filled in. The exit
code is 1 when a finding has no label or a labelled finding is gone (the labels need
updating), else 0. No third-party code is kept: files are extracted to a temporary
folder.
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

from torchplace.lint import RULES, lint_paths

__all__ = ["main"]

HERE = Path(__file__).resolve().parent
Key = tuple[str, str, int, int, str]  # repo, path, line, column, code
VERDICTS = ("actionable", "not")


def _read_repos(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _read_labels(path: Path, commits: dict[str, str]) -> dict[Key, tuple[str, str]]:
    labels: dict[Key, tuple[str, str]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f), 2):
            if commits.get(row["repo"]) != row["commit"]:
                raise SystemExit(
                    f"{path}:{n}: {row['repo']} at {row['commit']} is not in repos.csv"
                )
            if row["verdict"] not in VERDICTS:
                verdict = row["verdict"]
                raise SystemExit(f"{path}:{n}: verdict {verdict!r} is not one of {VERDICTS}")
            key = (row["repo"], row["path"], int(row["line"]), int(row["column"]), row["code"])
            labels[key] = (row["verdict"], row["reason"])
    return labels


def _git_dir(mirrors: Path, repo: str) -> Path | None:
    owner, name = repo.split("/")
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / owner / f"{name}.git"):
        if candidate.is_dir():
            return candidate
    return None


def _extract(git_dir: Path, commit: str, scope: list[str], dest: Path) -> None:
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


def _precision(actionable: int, judged: int) -> str:
    return f"{actionable}/{judged} = {actionable / judged:.1%}" if judged else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--repos", type=Path, default=HERE / "repos.csv")
    parser.add_argument("--labels", type=Path, default=HERE / "labels.csv")
    parser.add_argument("--split", choices=("tune", "heldout"), help="only this split")
    parser.add_argument("--todo", type=Path, help="write the unlabelled findings here (CSV)")
    args = parser.parse_args(argv)

    repos = [r for r in _read_repos(args.repos) if args.split in (None, r["split"])]
    commits = {r["repo"]: r["commit"] for r in _read_repos(args.repos)}
    labels = _read_labels(args.labels, commits)

    todo: list[list[str]] = []
    problems = 0
    table = []
    per_rule: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for row in repos:
        repo, commit, split = row["repo"], row["commit"], row["split"]
        git_dir = _git_dir(args.mirrors, repo)
        if git_dir is None:
            print(f"skip {repo}: no mirror under {args.mirrors}", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            scope = row["scope"].split() if row.get("scope") else []
            try:
                _extract(git_dir, commit, scope, Path(tmp))
            except subprocess.CalledProcessError as e:
                print(f"skip {repo}: cannot read {commit[:12]}: {e.stderr.decode()[:200]}")
                continue
            start = time.process_time()
            result = lint_paths([tmp], select=["ALL"], respect_gitignore=False)
            seconds = time.process_time() - start
            found: set[Key] = set()
            for finding in result.findings:
                rel = Path(finding.path).relative_to(tmp).as_posix()
                key = (repo, rel, finding.line, finding.col, finding.code)
                found.add(key)
                if key not in labels:
                    problems += 1
                    todo.append([repo, commit, *map(str, key[1:]), "", ""])
                    print(f"unlabelled: {repo} {rel}:{finding.line}:{finding.col} {finding.code}")
        for key in labels:
            if key[0] == repo and key not in found:
                problems += 1
                print(f"gone: {key[0]} {key[1]}:{key[2]}:{key[3]} {key[4]}")
        verdicts: Counter[str] = Counter()
        for key in found & labels.keys():
            verdict = labels[key][0]
            verdicts[verdict] += 1
            per_rule[(split, key[4])][verdict] += 1
        by_code = Counter(k[4] for k in found)
        table.append((split, repo, commit, result.files, result.lines, by_code, verdicts, seconds))

    if args.todo is not None:
        with open(args.todo, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(
                ["repo", "commit", "path", "line", "column", "code", "verdict", "reason"]
            )
            writer.writerows(todo)
    if not table:
        print("no labelled repository found; nothing measured", file=sys.stderr)
        return 0
    for split in ("tune", "heldout"):
        rows = [t for t in table if t[0] == split]
        if not rows:
            continue
        print(f"\n### {split}\n")
        print("| repository (commit) | files | lines | findings per rule | actionable | not |")
        print("|---|---|---|---|---|---|")
        totals: Counter[str] = Counter()
        for _, repo, commit, files, lines, by_code, verdicts, seconds in rows:
            rules = ", ".join(f"{c} {n}" for c, n in sorted(by_code.items())) or "none"
            print(
                f"| {repo} ({commit[:7]}) | {files} | {lines:,} | {rules} | "
                f"{verdicts['actionable']} | {verdicts['not']} |"
            )
            totals.update(files=files, lines=lines, seconds=int(seconds * 1000))
            totals.update(verdicts)
        print(
            f"| **total** | {totals['files']} | {totals['lines']:,} | | "
            f"{totals['actionable']} | {totals['not']} |"
        )
        print("\n| rule | on by default | findings | actionable | precision |")
        print("|---|---|---|---|---|")
        default = Counter[str]()
        for code in RULES:
            c = per_rule.get((split, code))
            if not c:
                continue
            judged = c["actionable"] + c["not"]
            on = "yes" if RULES[code].default else "no (opt-in)"
            print(f"| {code} | {on} | {judged} | {c['actionable']} | "
                  f"{_precision(c['actionable'], judged)} |")  # fmt: skip
            if RULES[code].default:
                default.update(c)
        judged_all = totals["actionable"] + totals["not"]
        judged_default = default["actionable"] + default["not"]
        every = _precision(totals["actionable"], judged_all)
        on = _precision(default["actionable"], judged_default)
        print(f"\n{split}: every rule {every} actionable; the rules on by default {on}")
        print(f"linted {totals['lines']:,} lines in {totals['seconds'] / 1000:.2f} CPU s")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
