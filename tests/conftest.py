"""Suite-wide switches: the GPU backend and the student file for assignment grading.

`MINIGRAPH_DEVICE=gpu python -m pytest` runs every executor on CuPy ("auto" devices
follow the variable); tests marked `gpu` skip cleanly where CuPy sees no GPU.
`python -m pytest -m a2 --student path/to/solution.py` grades a student's file.
"""

from __future__ import annotations

import pytest

from minigraph.backend import gpu_available


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--student", action="store", default=None,
                     help="path to a student's solution file to grade (markers a1, a2, a3)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def student_path(request: pytest.FixtureRequest) -> str | None:
    """The --student file, or None (then the grading tests grade the reference solution)."""
    return request.config.getoption("--student")
