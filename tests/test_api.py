"""The public API: every exported name resolves, and importing does nothing."""

from __future__ import annotations

import subprocess
import sys

import torchplace


def test_every_exported_name_resolves() -> None:
    assert set(torchplace.__all__) == {*torchplace._EXPORTS, "__version__"}
    for name in torchplace.__all__:
        assert getattr(torchplace, name) is not None, name


def test_functions_are_not_shadowed_by_modules() -> None:
    import torchplace._cli.info  # imports the device module

    assert callable(torchplace.devices) and callable(torchplace.device)
    assert torchplace.device("cpu").type == "cpu"


def test_import_is_lazy() -> None:
    code = "import sys, torchplace; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
