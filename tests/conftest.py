"""Suite-wide switches: the GPU backend, the student file for assignment grading, time
limits fit for a busy machine, and the notebook runner the notebook tests share.

`MINIGRAPH_DEVICE=gpu python -m pytest` runs every executor on CuPy ("auto" devices
follow the variable); tests marked `gpu` skip cleanly where CuPy sees no GPU.
`python -m pytest -m a2 --student path/to/solution.py` grades a student's file (the
option comes from the plugin minigraph.grading.sandbox.pytest_plugin, loaded in pyproject.toml).

The suite must pass on a loaded 2-core machine, so no limit here is one a slow run of
correct code can reach: a notebook has one whole-notebook limit of many minutes (a hang
still fails), and the graders' default per-case limits are scaled up while the suite
grades reference solutions.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from minigraph.backend import gpu_available

ROOT = Path(__file__).resolve().parents[1]
# Seconds for a whole notebook, every cell and the kernel's start included. Each notebook
# takes well under a minute on an idle machine; this only stops a hang.
NOTEBOOK_LIMIT = 900
# The graders' default time limits x this while the suite grades reference solutions
# (minigraph.grading.runner.time_scale); tests of the time limit itself pass theirs.
REFERENCE_TIME_SCALE = "10"


def pytest_configure(config: pytest.Config) -> None:
    grading_a_student = config.getoption("--student", default=None) or \
        os.environ.get("MINIGRAPH_STUDENT")
    if not grading_a_student:
        os.environ.setdefault("MINIGRAPH_TIME_SCALE", REFERENCE_TIME_SCALE)


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist reads the groups into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # With pytest-xdist (`-n 2 --dist loadgroup`, as .ci/run runs the suite), everything that
    # starts Jupyter kernels in a browser or a notebook runs in one worker, one at a time
    # (kernels started side by side on a loaded machine have been shut down by JupyterLab),
    # and the nbgrader course round in another; the rest is shared out.
    for item in items:
        path = item.nodeid.split("::")[0]
        if path.endswith("test_nbgrader.py"):
            item.add_marker(pytest.mark.xdist_group("nbgrader"))
        elif path.endswith("test_grading_a1.py"):   # its module fixture grades 6 answers once
            item.add_marker(pytest.mark.xdist_group("grading_a1"))
        elif path.endswith("test_browser.py") or "run_notebook" in getattr(
                item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("jupyter"))
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def run_notebook(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[object, float]]:
    """`run_notebook(path, limit=NOTEBOOK_LIMIT, **env)`: execute a notebook as a student
    would, in its own folder, on NumPy, with `env` set in the kernel's environment (None
    removes a variable); returns the executed notebook and its seconds. Outputs must have
    been stripped (lessons/src/build.py). Past `limit` seconds nbclient's CellTimeoutError
    is raised."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    monkeypatch.setenv("MINIGRAPH_DEVICE", "cpu")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    # Small matrices: BLAS threads only spin against the other processes of a busy machine
    # (5x slower measured); the kernel reads these when it imports NumPy.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")

    def run(path: Path, limit: float = NOTEBOOK_LIMIT, **env: str | None
            ) -> tuple[object, float]:
        for key, value in env.items():
            if value is None:
                monkeypatch.delenv(key, raising=False)
            else:
                monkeypatch.setenv(key, value)
        nb = nbformat.read(path, as_version=4)
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
            f"{path.name} is committed with outputs; strip them (lessons/src/build.py does)"
        t0 = time.perf_counter()
        asyncio.run(_execute(nb, path.parent, limit))
        return nb, time.perf_counter() - t0

    return run


async def _execute(nb: object, cwd: Path, limit: float) -> None:
    """Run every cell of `nb` in a fresh kernel, within `limit` seconds in all."""
    import nbclient
    from jupyter_client.manager import AsyncKernelManager

    deadline = time.monotonic() + limit

    def time_left(cell: object) -> int:
        # nbclient has per-cell limits only; each cell gets what is left of the notebook's.
        # (At least 1: nbclient reads 0 as "no limit".)
        return max(1, int(deadline - time.monotonic()))

    sockets = tempfile.mkdtemp(prefix="mg-kernel-")
    try:
        # IPC transport: the kernel's five channels are Unix sockets in a folder of its own,
        # not TCP ports. Over TCP, jupyter_client picks "free" ports by binding and closing
        # them before the kernel binds them again; a kernel started at the same moment
        # elsewhere on the machine (another test run, JupyterLab) can take one in between,
        # and the kernel dies on "Address already in use". No port, no race.
        km = AsyncKernelManager(kernel_name="python3",
                                **({"transport": "ipc", "ip": os.path.join(sockets, "k")}
                                   if os.name == "posix" else {}))
        client = nbclient.NotebookClient(
            nb, km=km, timeout_func=time_left, startup_timeout=NOTEBOOK_LIMIT,
            # Outputs that arrive late on a busy machine are waited for, and if they never
            # come the test fails here instead of finding a cell's output missing.
            iopub_timeout=60, raise_on_iopub_timeout=True,
            resources={"metadata": {"path": str(cwd)}})
        await client.async_execute(cleanup_kc=True)   # shut the kernel down: we made km
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
