"""Suite-wide switches: the GPU backend and the student file for assignment grading.

`MINIGRAPH_DEVICE=gpu python -m pytest` runs every executor on CuPy ("auto" devices
follow the variable); tests marked `gpu` skip cleanly where CuPy sees no GPU.
`python -m pytest -m a2 --student path/to/solution.py` grades a student's file (the
option comes from the plugin minigraph.grading.pytest_plugin, loaded in pyproject.toml).
"""

from __future__ import annotations

import pytest

from minigraph.backend import gpu_available


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
