"""The GPU path (CuPy). Every test here skips cleanly where CuPy sees no CUDA device;
`MINIGRAPH_DEVICE=gpu python -m pytest` also runs the rest of the suite's executors there."""

import numpy as np
import pytest

import minigraph as mg
from minigraph.models import get_model

pytestmark = pytest.mark.gpu
ZOO = ["mlp", "cnn", "resnet", "transformer", "lstm", "unet", "densenet"]
SHARING = ["none", "refcount", "ge", "greedy-size", "bestfit"]


def _feeds(m):
    return {**m.make_batch(0), **m.init_params(0)}


@pytest.mark.parametrize("name", ZOO)
def test_gpu_run_matches_cpu_within_float_tolerance(name):
    m = get_model(name)
    report = mg.plan_memory(m.graph, mg.MemoryOptions(planner="refcount", inplace=True,
                                                      alignment=512))
    cpu = mg.Executor(m.graph, report.plan, device="cpu").run(_feeds(m))
    gpu = mg.Executor(m.graph, report.plan, device="gpu").run(_feeds(m))
    for k in cpu:
        np.testing.assert_allclose(gpu[k], cpu[k], rtol=2e-3, atol=1e-4, err_msg=k)


@pytest.mark.parametrize("planner", SHARING)
@pytest.mark.parametrize("name", ZOO)
def test_gpu_device_memory_equals_arena_plus_unplanned_within_1_percent(name, planner):
    m = get_model(name)
    report = mg.plan_memory(m.graph, mg.MemoryOptions(planner=planner, inplace=True))
    ex = mg.Executor(m.graph, report.plan, device="gpu")
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()
    ex.run(_feeds(m), measure=True)
    s = ex.last_stats
    assert s.arena_bytes == report.arena_bytes
    assert abs(s.measured_peak - s.expected_peak) <= 0.01 * s.expected_peak, s


def test_gpu_step_makes_no_host_round_trip():
    import cupyx
    m = get_model("mlp")
    report = mg.plan_memory(m.graph, mg.MemoryOptions(planner="refcount", inplace=True))
    ex = mg.Executor(m.graph, report.plan, device="gpu")
    ex.load(_feeds(m))
    with cupyx.allow_synchronize(False):     # a device-to-host copy would synchronise
        for k in range(3):
            ex.step(step=k)
