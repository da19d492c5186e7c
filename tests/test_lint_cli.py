"""``torchplace lint`` through ``python -m torchplace``: formats, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_torchplace

BAD = "import torch\nm = torch.load('ckpt.pt')\n"


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(BAD)
    (tmp_path / "pkg" / "clean.py").write_text("import torch\nx = torch.zeros(3)\n")
    (tmp_path / "pkg" / "broken.py").write_text("import torch\n\ndef f(:\n    pass\n")
    (tmp_path / "pkg" / "blob.py").write_bytes(b"\x00\x01\x02 not text")
    (tmp_path / "pkg" / "notes.txt").write_text(BAD)  # not *.py: not searched
    return tmp_path / "pkg"


def test_compiler_format_exit_1_and_the_others_go_on(tmp_path: Path) -> None:
    pkg = _tree(tmp_path)
    done = run_torchplace("lint", str(pkg), cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines == [
        f"{pkg / 'broken.py'}:3:7: TPL001 cannot parse this file: invalid syntax",
        f"{pkg / 'train.py'}:2:5: TPL302 " + lines[1].split(" TPL302 ", 1)[1],
    ]
    assert "weights_only" in lines[1]
    assert f"skipped {pkg / 'blob.py'}: binary file" in done.stderr
    assert "Found 2 findings in 2 of 3 files" in done.stderr


def test_clean_is_exit_0(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("import torch\nx = torch.zeros(3)\n")
    done = run_torchplace("lint", "ok.py", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "")
    assert "All clean: 1 file, 2 lines checked." in done.stderr


def test_default_path_is_the_working_folder(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BAD)
    done = run_torchplace("lint", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.startswith("train.py:2:5: TPL302 ")


def test_gitignore_is_respected(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n*_tmp.py\n!keep_tmp.py\n")
    for name in ("generated/a.py", "sub/b_tmp.py", "sub/keep_tmp.py", "sub/c.py"):
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(BAD)
    (tmp_path / "sub" / ".gitignore").write_text("c.py\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "lib.py").write_text(BAD)
    done = run_torchplace("lint", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == ["sub/keep_tmp.py"]
    done = run_torchplace("lint", "--no-gitignore", ".", cwd=tmp_path)
    assert len(done.stdout.splitlines()) == 4  # still not .venv
    done = run_torchplace("lint", "generated/a.py", cwd=tmp_path)  # named: always linted
    assert done.returncode == 1


def test_bad_usage_is_exit_2_with_what_to_do(tmp_path: Path) -> None:
    done = run_torchplace("lint", "missing.py", "also_missing", cwd=tmp_path)
    assert done.returncode == 2
    assert "error: no such file or folder: missing.py, also_missing" in done.stderr
    assert "hint:" in done.stderr

    (tmp_path / "a.py").write_text(BAD)
    done = run_torchplace("lint", "--select", "TPL101,TPL9", "a.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "--select 'TPL9' names no rule; valid codes are TPL001, TPL101" in done.stderr
    assert "torchplace lint --list-rules" in done.stderr

    done = run_torchplace("lint", "--ignore", "E501", "a.py", cwd=tmp_path)
    assert done.returncode == 2


def test_select_ignore_and_noqa(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import torch\nsd = torch.load('a.pt')\nm = torch.nn.DataParallel(n)  # noqa: TPL401\n"
    )
    done = run_torchplace(
        "lint", "--select", "TPL3,TPL301", "--ignore", "TPL302", "a.py", cwd=tmp_path
    )
    assert [line.split(" ")[1] for line in done.stdout.splitlines()] == ["TPL301"]
    done = run_torchplace("lint", "--select", "TPL401", "a.py", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "")


def test_list_rules(tmp_path: Path) -> None:
    done = run_torchplace("lint", "--list-rules")
    assert done.returncode == 0
    assert "TPL105  fixable  unsynchronized-timing" in done.stdout
    rows = json.loads(run_torchplace("lint", "--list-rules", "--json").stdout)
    assert {r["code"] for r in rows} >= {"TPL101", "TPL401"}
    assert next(r for r in rows if r["code"] == "TPL101")["sim_events"] == [
        "item",
        "tolist",
        "to cpu",
    ]


def test_many_files_without_a_terminal_print_no_progress(tmp_path: Path) -> None:
    for i in range(250):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    done = run_torchplace("lint", ".", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stderr.strip() == "All clean: 250 files, 250 lines checked."


def test_progress_on_a_terminal_for_big_folders(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    for i in range(250):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "torchplace", "lint", "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=follower,
        env={**env, "TERM": "xterm"},
        timeout=120,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    shown = b"".join(chunks).decode(errors="replace")
    assert done.returncode == 0
    assert "torchplace lint" in shown  # the progress bar
    assert "/250" in shown
    assert "All clean: 250 files" in shown


def test_symlinked_folders_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.py").write_text(BAD)
    (tmp_path / "real" / "loop").symlink_to(tmp_path / "real")
    done = run_torchplace("lint", ".", cwd=tmp_path)
    assert done.stdout.splitlines() == [
        "real/a.py:2:5: TPL302 " + done.stdout.split(" TPL302 ", 1)[1].strip()
    ]


# ---- integrations (issue 25) -------------------------------------------------------------

SCRIPT = (
    "import torch\n"
    "m = torch.nn.DataParallel(net)\n"
    "state = torch.load('ckpt.pt')\n"
    "z = torch.zeros(3).to(device)\n"
)


def test_exit_zero_statistics_and_github_format(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SCRIPT)
    done = run_torchplace("lint", "--exit-zero", "a.py", cwd=tmp_path)
    assert done.returncode == 0 and "TPL302" in done.stdout

    done = run_torchplace("lint", "--statistics", "--select", "ALL", "a.py", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "1  TPL206  cpu-construct-then-move  (1 fixable)",
        "1  TPL301  load-without-map-location",
        "1  TPL302  load-without-weights-only",
        "1  TPL401  data-parallel",
    ]

    done = run_torchplace("lint", "--format", "github", "a.py", cwd=tmp_path)
    assert done.returncode == 1
    first, second = done.stdout.splitlines()
    assert first.startswith(
        "::warning file=a.py,line=3,col=9,endLine=3,endColumn=30,"
        "title=TPL302 load-without-weights-only::`torch.load(...)` relies on"
    )
    assert second.startswith("::warning file=a.py,line=4,col=5,")
    assert "Found 2 findings" in done.stderr

    (tmp_path / "b.py").write_text("def f(:\n")
    done = run_torchplace("lint", "--format", "github", "b.py", cwd=tmp_path)
    assert done.stdout.startswith("::error file=b.py,line=1,col=7,")


def test_github_format_escapes_what_workflow_commands_need(tmp_path: Path) -> None:
    from torchplace.lint.engine import LintResult
    from torchplace.lint.finding import Finding
    from torchplace.lint.output import format_github

    result = LintResult([Finding("dir,x/a:b.py", 1, 1, "TPL302", "50% done\nnext")])
    assert format_github(result) == (
        "::warning file=dir%2Cx/a%3Ab.py,line=1,col=1,"
        "title=TPL302 load-without-weights-only::50%25 done%0Anext"
    )


def test_opt_in_rules_run_when_named(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SCRIPT)
    codes = lambda *args: [  # noqa: E731
        line.split(" ")[1]
        for line in run_torchplace("lint", *args, "a.py", cwd=tmp_path).stdout.splitlines()
    ]
    assert codes() == ["TPL302", "TPL206"]
    assert codes("--select", "TPL4") == []  # a prefix selects the rules on by default
    assert codes("--select", "TPL401") == ["TPL401"]
    assert codes("--select", "ALL", "--ignore", "TPL3") == ["TPL401", "TPL206"]
    listed = run_torchplace("lint", "--list-rules").stdout
    assert "data-parallel" in listed and "(off by default: --select TPL401)" in listed
    rows = json.loads(run_torchplace("lint", "--list-rules", "--json").stdout)
    assert {r["code"]: r["default"] for r in rows}["TPL401"] is False


def test_pyproject_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchplace.lint]\n"
        'extend-select = ["TPL401"]\n'
        'ignore = ["TPL206"]\n'
        "[tool.torchplace.lint.per-file-ignores]\n"
        '"tests/*" = ["TPL3"]\n'
        '"!src/*" = ["TPL401"]\n'
    )
    for folder in ("src", "tests"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.py").write_text(SCRIPT)
    done = run_torchplace("lint", ".", cwd=tmp_path)
    assert [(line.split(":")[0], line.split(" ")[1]) for line in done.stdout.splitlines()] == [
        ("src/a.py", "TPL401"),
        ("src/a.py", "TPL302"),
    ]
    # from a subfolder the same file applies (the nearest pyproject.toml with the table)
    done = run_torchplace("lint", "a.py", cwd=tmp_path / "src")
    assert [line.split(" ")[1] for line in done.stdout.splitlines()] == ["TPL401", "TPL302"]
    # the command line's --select replaces the file's selection; --isolated ignores the file
    done = run_torchplace("lint", "--select", "TPL206", "src", cwd=tmp_path)
    assert done.stdout == ""  # still ignored by the file's ignore
    done = run_torchplace("lint", "--isolated", "src", cwd=tmp_path)
    assert [line.split(" ")[1] for line in done.stdout.splitlines()] == ["TPL302", "TPL206"]


def test_bad_configuration_is_exit_2_with_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SCRIPT)
    (tmp_path / "pyproject.toml").write_text('[tool.torchplace.lint]\nselect = ["TPL9"]\n')
    done = run_torchplace("lint", "a.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "pyproject.toml [tool.torchplace.lint]: select 'TPL9' names no rule" in done.stderr
    assert "hint:" in done.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.torchplace.lint]\nselct = ["TPL1"]\n')
    done = run_torchplace("lint", "a.py", cwd=tmp_path)
    assert done.returncode == 2 and "unknown key 'selct'" in done.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.torchplace.lint\n")
    done = run_torchplace("lint", "--config", "pyproject.toml", "a.py", cwd=tmp_path)
    assert done.returncode == 2 and "is not valid TOML" in done.stderr
