"""Command lines: torchplace's options only in full, a script's arguments untouched (issue 27).

argparse took ``--n`` after a script's name for a prefix of ``--nnodes`` ("ambiguous
option") and dropped a script's ``--``; ``torchplace sim``, ``run`` and ``lint`` now match
their own options only as written in full, and give everything after the script's name (or
``-m MODULE``) to the script as it was typed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from helpers import run_torchplace
from torchplace import cli

# a script with options of its own that are prefixes of torchplace's (--n: --nnodes,
# --nproc-per-node, --network; --g: --gpu, --gpus; --m: --memory, --min, --max, --margin)
# or the same (--max, --gpu, -m, --json, -h)
SCRIPT = """\
import argparse, json, sys
p = argparse.ArgumentParser()
p.add_argument("--n", type=int)
p.add_argument("--g")
p.add_argument("--m")
p.add_argument("--max", type=int)
p.add_argument("rest", nargs=argparse.REMAINDER)
print("ARGS " + json.dumps({"argv": sys.argv[1:], **vars(p.parse_args())}), file=sys.stderr)
"""
SCRIPT_ARGS = ["--n", "5", "--g", "H100", "--m", "x", "--max", "3", "--", "--gpu", "-m", "-h"]


def _parse(*argv: str) -> argparse.Namespace:
    command = next(a for a in argv if not a.startswith("-"))
    return cli._build_parser(command).parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "script", "args"),
    [
        (["train.py", "--n", "5"], "train.py", ["--n", "5"]),
        (["--gpu", "T4", "train.py", "--gpu", "A100"], "train.py", ["--gpu", "A100"]),
        (["--gpu=T4", "train.py", "--gpus=2", "-h"], "train.py", ["--gpus=2", "-h"]),
        (["--json", "train.py", "--", "--json"], "train.py", ["--", "--json"]),
        (["--", "train.py", "--n"], "train.py", ["--n"]),
        (["--", "-odd.py", "x"], "-odd.py", ["x"]),
        (["--find-max", "B", "train.py", "--batch", "{B}", "--max", "9"], "train.py",
         ["--batch", "{B}", "--max", "9"]),
    ],
)  # fmt: skip
def test_sim_gives_everything_after_the_script_to_it(
    argv: list[str], script: str, args: list[str]
) -> None:
    ns = _parse("sim", *argv)
    assert (ns.script, ns.args, ns.module) == (script, args, None)


def test_sim_module_takes_the_rest_and_own_options_still_parse() -> None:
    ns = _parse("sim", "--gpu", "T4", "--values", "placeholder", "-m", "pkg.train", "--n", "-m")
    assert (ns.gpu, ns.values, ns.module, ns.script) == ("T4", "placeholder", ["pkg.train",
            "--n", "-m"], None)  # fmt: skip
    assert _parse("sim", "-mpkg.train", "--g").module == ["pkg.train", "--g"]
    assert _parse("sim", "--nnodes", "2").script is None  # no script: the built-in example


@pytest.mark.parametrize("prefix", ["--n", "--g", "--m", "--ma", "--val", "--json=1"])
def test_sim_options_match_only_in_full(prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        _parse("sim", prefix, "1", "train.py")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "ambiguous" not in err and prefix.split("=")[0] in err


def test_sim_module_needs_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse("sim", "--gpu", "T4", "-m")
    assert "argument -m: expected a module name" in capsys.readouterr().err


def test_run_and_lint_parse_the_same_way(capsys: pytest.CaptureFixture[str]) -> None:
    ns = _parse("run", "--procs", "2", "train.py", "--procs", "3", "--n", "--", "-m")
    assert (ns.procs, ns.target, ns.args, ns.module) == (2, "train.py", ["--procs", "3", "--n",
            "--", "-m"], False)  # fmt: skip
    ns = _parse("run", "-m", "pkg.train", "--max", "1")
    assert (ns.module, ns.target, ns.args) == (True, "pkg.train", ["--max", "1"])
    for argv in (("run", "--proc", "2", "train.py"), ("lint", "--sel", "TPL1", "a.py")):
        with pytest.raises(SystemExit):
            _parse(*argv)
        assert "unrecognized arguments: " + argv[1] in capsys.readouterr().err
    assert _parse("lint", "--select", "TPL1", "a.py", "b").paths == ["a.py", "b"]


def test_a_script_with_options_like_torchplaces_runs_under_sim_and_run(tmp_path: Path) -> None:
    script = tmp_path / "opts.py"
    script.write_text(SCRIPT)
    done = run_torchplace("sim", "--json", "--values", "placeholder", str(script), *SCRIPT_ARGS)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("ARGS "))
    seen = json.loads(line[5:])
    assert seen["argv"] == SCRIPT_ARGS
    assert (seen["n"], seen["g"], seen["m"], seen["max"]) == (5, "H100", "x", 3)
    assert json.loads(done.stdout)["error"] is None
    dry = run_torchplace("run", "--dry-run", str(script), *SCRIPT_ARGS)
    assert dry.returncode == 0, dry.stderr
    assert dry.stderr.rstrip().endswith(" ".join([str(script), *SCRIPT_ARGS]))
