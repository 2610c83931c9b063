"""Swap plans on CuPy (runtime/swapping.py): pinned host buffers, copies on a second
stream ordered by events; results bitwise those of the same graph run without swapping on
the GPU, and within float tolerance of NumPy. Skipped where CuPy sees no GPU."""

from __future__ import annotations

import numpy as np
import pytest
from graphgen import bytes_equal

import minigraph as mg
from minigraph.memory.swap_plan import lowest_swap_plan
from minigraph.models import get_model

pytestmark = pytest.mark.gpu

ZOO = ["mlp", "cnn", "resnet", "transformer", "lstm", "unet", "densenet"]


@pytest.mark.parametrize("name", ZOO)
def test_gpu_swap_plan_runs_bitwise_equal_to_the_gpu_run_without_swapping(name):
    m = get_model(name)
    g, feeds = m.graph, m.feeds(0)
    report = lowest_swap_plan(g, mg.MemoryOptions(planner="greedy-size", inplace=True))
    assert report.swaps
    want = mg.Executor(g, device="gpu").run(feeds)
    got = mg.Executor(g, report, device="gpu").run(feeds)
    assert bytes_equal(got, want)
    cpu = mg.Executor(g, report, device="cpu").run(feeds)
    for k in cpu:
        np.testing.assert_allclose(got[k], cpu[k], rtol=2e-3, atol=1e-4, err_msg=k)


def test_gpu_swap_host_buffers_are_pinned_and_resident_steps_repeat():
    import cupy
    m = get_model("resnet")
    g, feeds = m.graph, m.feeds(0)
    report = lowest_swap_plan(g, mg.MemoryOptions(planner="bestfit"))
    ex = mg.Executor(g, report, device="gpu")
    host = next(iter(ex._swap.host.values()))
    assert cupy.cuda.runtime.pointerGetAttributes(host.ctypes.data).type == 1   # host, pinned
    first = ex.run(feeds)
    ex.load(feeds)
    out = {k: cupy.asnumpy(v) for k, v in ex.step().items()}
    assert bytes_equal(out, first)
