"""A simulation report names the lint rule behind a sync or a device error (sim/_advice.py)."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

from torchplace.sim import simulate
from torchplace.sim._advice import error_kind

SCRIPT = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        offset = torch.arange(4.0)
        return self.lin(x) + offset


model = nn.Linear(4, 1).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4, device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total = loss.item()
torch.cuda.synchronize()
Net().to("cuda")(torch.randn(2, 4, device="cuda"))
"""


def _run(tmp_path: Path, source: str) -> dict:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source))
    with pytest.raises(RuntimeError), simulate("H100") as report:
        runpy.run_path(str(path), run_name="__main__")
    return report.to_dict()


def test_syncs_and_device_errors_name_the_rule_and_its_fix(tmp_path: Path) -> None:
    report = _run(tmp_path, SCRIPT)
    item = next(s for s in report["syncs"] if s["kind"] == "item")
    assert item["line"] == 22
    assert [(f["code"], f["line"]) for f in item["lint"]] == [("TPL101", 22)]
    assert item["lint"][0]["hint"].startswith("accumulate on the device")
    # the error is at the addition (line 12); the rule's finding is the factory above it
    assert report["error"]["line"] == 12
    assert [(f["code"], f["line"]) for f in report["error"]["lint"]] == [("TPL201", 11)]
    assert report["error"]["lint"][0]["doc"].endswith("#tpl201-factory-in-forward-without-device")


def test_events_without_a_rule_link_to_nothing(tmp_path: Path) -> None:
    source = SCRIPT.replace("    total = loss.item()\n", "").replace("torch.arange(4.0)", "x[0]")
    path = tmp_path / "ok.py"
    path.write_text(source + "print(torch.ones(2, device='cuda').cpu())\n")
    with simulate("H100") as report:
        runpy.run_path(str(path), run_name="__main__")
    data = report.to_dict()
    assert data["error"] is None
    assert data["syncs"] and all(s["lint"] == [] for s in data["syncs"])


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("Expected all tensors to be on the same device, but found ...", "device mismatch"),
        (
            "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same",
            "device mismatch",
        ),
        ("CUDA error: invalid device ordinal", "invalid device"),
        ("mat1 and mat2 shapes cannot be multiplied", None),
    ],
)
def test_error_kinds(message: str, kind: str | None) -> None:
    assert error_kind(message) == kind


def test_an_error_links_to_an_opt_in_rule_the_run_confirmed(tmp_path: Path) -> None:
    # TPL203 (CUDA hard-coded) is off by default in `torchplace lint`; the run itself
    # raised the invalid-device error, so the report still names the rule
    source = """\
    import torch

    x = torch.ones(2)
    y = x.to("cuda:3")
    """
    report = _run(tmp_path, source)
    assert report["error"]["line"] == 4
    assert [f["code"] for f in report["error"]["lint"]] == ["TPL203"]
