"""GPU tests run on a real GPU where there is one, and on a simulated GPU where there is none.

A test marked ``@pytest.mark.gpu`` needs CUDA. On a machine with a GPU (or in a session run
with ``pytest --sim-gpu NAME``) it runs as written. Elsewhere — the CPU-only CI — torchplace's
pytest plugin runs it on a simulated H100 (``@pytest.mark.sim_gpu``, real values), so the
GPU code paths are exercised on every commit. A test whose meaning needs real hardware says
so with ``@pytest.mark.gpu(simulated=False, reason="why")`` and skips without a GPU.
"""

from __future__ import annotations

import sys

import pytest

SIMULATED_GPU = "H100"

# pip's entry point registers torchplace's plugin (before this file is read); a checkout that
# is only on PYTHONPATH has no entry point, so the plugin is registered here — else the
# ``sim_gpu`` marker would do nothing and such a test would run on whatever GPU exists.
if "torchplace.pytest_plugin" not in sys.modules:
    pytest_plugins = ["torchplace.pytest_plugin"]


def _has_plugin(config: pytest.Config) -> bool:
    manager = config.pluginmanager
    return bool(manager.has_plugin("torchplace") or manager.has_plugin("torchplace.pytest_plugin"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():  # a real GPU, or --sim-gpu for the whole session
        return
    plugin = _has_plugin(config)
    for item in items:
        marker = item.get_closest_marker("gpu")
        if marker is None or item.get_closest_marker("sim_gpu") is not None:
            continue
        if not marker.kwargs.get("simulated", True):
            why = marker.kwargs.get("reason", "it measures the real hardware")
            item.add_marker(pytest.mark.skip(reason=f"needs a real CUDA GPU: {why}"))
        elif not plugin:
            item.add_marker(
                pytest.mark.skip(reason="needs a CUDA GPU, or torchplace's pytest plugin")
            )
        else:
            item.add_marker(pytest.mark.sim_gpu(SIMULATED_GPU))
