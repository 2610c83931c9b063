"""The Core ATen importer's models on the GPU (issue 44, item 4): each of the twelve
architectures of `minigraph.fromtorch.architectures`, imported from PyTorch, runs on CuPy in
its planned arena with the numbers of the NumPy run (float tolerance) and the device memory
the plan declares (arena + inputs, parameters and outputs + the largest declared workspace,
within 1%), as the zoo does in tests/test_gpu.py. Skips cleanly without a GPU;
`benchmarks/gpu_run.sh` runs it on a lent one."""

import numpy as np
import pytest

import minigraph as mg

torch = pytest.importorskip("torch")
from minigraph.fromtorch import from_torch  # noqa: E402
from minigraph.fromtorch.architectures import ARCHITECTURES, architecture  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("planner", ["refcount", "bestfit"])
@pytest.mark.parametrize("name", ARCHITECTURES)
def test_imported_model_on_the_gpu_is_the_numpy_run_in_the_declared_memory(name, planner):
    import cupy
    module, inputs, loss_fn, targets = architecture(name)
    model = from_torch(module, inputs, loss_fn, targets=targets, lr=0.1, name=name)
    report = mg.plan_memory(model.graph, mg.MemoryOptions(planner=planner, inplace=True))
    feeds = model.feeds(0)
    cpu = mg.Executor(model.graph, report.plan, device="cpu").run(feeds)
    cupy.get_default_memory_pool().free_all_blocks()
    ex = mg.Executor(model.graph, report.plan, device="gpu")
    gpu = ex.run(feeds, measure=True)
    for k in cpu:
        np.testing.assert_allclose(gpu[k], cpu[k], rtol=2e-3, atol=1e-4, err_msg=f"{name}: {k}")
    s = ex.last_stats
    declared = s.arena_bytes + s.unplanned_bytes + s.workspace_bytes
    assert s.arena_bytes == report.arena_bytes
    assert abs(s.measured_peak - declared) <= 0.01 * declared, (
        f"{name}: measured {s.measured_peak:,} B, declared {declared:,} B; undeclared per "
        f"node: {s.undeclared}")
