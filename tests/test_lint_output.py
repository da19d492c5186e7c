"""``--json`` against its schema, ``--sarif`` against the official SARIF 2.1.0 schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from helpers import run_torchplace
from torchplace.lint.output import json_schema

SARIF_SCHEMA = Path(__file__).parent / "lint_fixtures" / "sarif-schema-2.1.0.json"
FIXTURES = Path(__file__).parent / "lint_fixtures"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for fixture in ("tpl101.py", "tpl206.py", "tpl401.py"):
        (tmp_path / fixture).write_text((FIXTURES / fixture).read_text())
    (tmp_path / "dir with space").mkdir()
    (tmp_path / "dir with space" / "é.py").write_text("import torch\ntorch.load('ckpt.pt')\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "blob.py").write_bytes(b"\x00binary")
    return tmp_path


def test_json_follows_its_schema_and_carries_every_finding(project: Path) -> None:
    done = run_torchplace("lint", "--json", ".", cwd=project)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(json_schema())
    jsonschema.validate(report, json_schema(), cls=jsonschema.Draft202012Validator)
    text = run_torchplace("lint", ".", cwd=project).stdout.splitlines()
    assert len(report["findings"]) == len(text) == report["summary"]["findings"]
    first = report["findings"][0]
    assert (
        text[0]
        == f"{first['path']}:{first['line']}:{first['column']}: {first['code']} {first['message']}"
    )
    assert report["summary"]["fixable"] == sum(f["fixable"] for f in report["findings"]) > 0
    assert report["skipped"] == [{"path": "blob.py", "reason": "binary file"}]


def test_json_schema_rejects_what_it_should() -> None:
    good = {
        "schema_version": 1,
        "tool": {"name": "torchplace lint", "version": "0.1.0"},
        "summary": {"files": 1, "lines": 2, "findings": 0, "fixable": 0, "fixed": 0, "by_code": {}},
        "findings": [],
        "skipped": [],
    }
    jsonschema.validate(good, json_schema())
    bad_code = {**good, "summary": {**good["summary"], "by_code": {"E501": 1}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_code, json_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "extra": 1}, json_schema())


def test_sarif_validates_against_the_official_schema(project: Path) -> None:
    done = run_torchplace("lint", "--select", "ALL", "--sarif", "out.sarif", ".", cwd=project)
    assert done.returncode == 1
    sarif = json.loads((project / "out.sarif").read_text())
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.validate(sarif, schema, cls=jsonschema.Draft4Validator)

    run = sarif["runs"][0]
    results = run["results"]
    text = done.stdout.splitlines()
    assert len(results) == len(text)  # the same findings as the lines
    rules = run["tool"]["driver"]["rules"]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "SRCROOT"
        assert location["region"]["startLine"] >= 1
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert "dir%20with%20space/%C3%A9.py" in uris
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == project.resolve().as_uri() + "/"
    assert {r["ruleId"] for r in results} >= {"TPL001", "TPL101", "TPL206", "TPL401"}


def test_sarif_to_stdout_is_json_only(project: Path) -> None:
    done = run_torchplace("lint", "--select", "ALL", "--sarif", "-", "tpl401.py", cwd=project)
    assert done.returncode == 1
    assert json.loads(done.stdout)["version"] == "2.1.0"
