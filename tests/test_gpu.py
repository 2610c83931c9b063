"""The GPU path (CuPy). Every test here skips cleanly where CuPy sees no CUDA device;
`MINIGRAPH_DEVICE=gpu python -m pytest` also runs the rest of the suite's executors there,
and `benchmarks/gpu_run.sh` runs this file on a lent GPU (its log: benchmarks/RESULTS.md).

What must hold on a GPU: the same numbers as NumPy (to float tolerance); ONE device
allocation for the arena, with every planned tensor a view into it; the measured device
memory equal to arena + inputs, parameters and outputs + the largest declared workspace,
within 1%, for every zoo model and every planner; no read-back to the host inside a
training step; the GPU's own kernels (`minigraph/ops/cuda.py`, `cuda_rows.py`) equal to their
NumPy twins.
"""

import numpy as np
import pytest

import minigraph as mg
from minigraph.errors import AllocationError, FeedError
from minigraph.memory.planners import JOINT_PLANNERS, PLANNERS
from minigraph.models import get_model

pytestmark = pytest.mark.gpu
ZOO = ["mlp", "cnn", "resnet", "transformer", "lstm", "unet", "densenet"]
SEARCHING = {"anneal": {"time_limit": 1.0}, "search": {"time_limit": 1.0},
             "ilp": {"time_limit": 2.0}}
# Every planner on every zoo model; a joint planner (schedule and offsets in one ILP) plans
# graphs of at most 40 nodes, so only the MLP.
CASES = [(name, p) for name in ZOO for p in sorted(PLANNERS)] + \
        [("mlp", p) for p in sorted(JOINT_PLANNERS)]


def _feeds(m):
    return {**m.make_batch(0), **m.init_params(0)}


def _options(planner):
    return mg.MemoryOptions(planner=planner, inplace=planner not in JOINT_PLANNERS,
                            planner_args=SEARCHING.get(planner, {}))


@pytest.mark.parametrize("name", ZOO)
def test_gpu_run_matches_cpu_within_float_tolerance(name):
    m = get_model(name)
    report = mg.plan_memory(m.graph, mg.MemoryOptions(planner="refcount", inplace=True,
                                                      alignment=512))
    cpu = mg.Executor(m.graph, report.plan, device="cpu").run(_feeds(m))
    gpu = mg.Executor(m.graph, report.plan, device="gpu").run(_feeds(m))
    for k in cpu:
        np.testing.assert_allclose(gpu[k], cpu[k], rtol=2e-3, atol=1e-4, err_msg=k)


@pytest.mark.parametrize(("name", "planner"), CASES)
def test_gpu_device_memory_equals_arena_plus_unplanned_within_1_percent(name, planner):
    import cupy
    m = get_model(name)
    report = mg.plan_memory(m.graph, _options(planner))
    ex = mg.Executor(m.graph, report.plan, device="gpu")
    cupy.get_default_memory_pool().free_all_blocks()
    ex.run(_feeds(m), measure=True)
    s = ex.last_stats
    declared = s.arena_bytes + s.unplanned_bytes + s.workspace_bytes
    assert s.arena_bytes == report.arena_bytes
    assert abs(s.measured_peak - declared) <= 0.01 * declared, (
        f"measured {s.measured_peak:,} B, declared {declared:,} B (arena {s.arena_bytes:,}, "
        f"unplanned {s.unplanned_bytes:,}, workspace {s.workspace_bytes:,}); undeclared "
        f"per node: {s.undeclared}")


@pytest.mark.parametrize("name", ZOO)
def test_gpu_arena_is_one_allocation_and_every_planned_tensor_a_view_into_it(name):
    from minigraph.backend import PoolMeter
    m = get_model(name)
    report = mg.plan_memory(m.graph, mg.MemoryOptions(planner="bestfit", inplace=True))
    ex = mg.Executor(m.graph, report.plan, device="gpu")
    with PoolMeter() as meter:
        ex.load(_feeds(m))
    arrays = ex._resident
    planned = [arrays[n] for n in report.plan.offsets]
    memories = {id(a.data.mem) for a in planned}
    assert len(memories) == 1                       # one device allocation holds them all
    base = planned[0].data.mem.ptr
    for n, off in report.plan.offsets.items():      # each at its planned offset
        assert arrays[n].data.ptr == base + off, n
    # load() allocated the arena once, plus one buffer per input, parameter and output
    unplanned = len(ex._wanted) + len(ex._own)
    assert meter.allocations == unplanned + 1, meter.allocations
    assert report.arena_bytes in meter.sizes


@pytest.mark.parametrize("name", ZOO)
def test_gpu_step_makes_no_host_round_trip(name):
    import cupyx
    m = get_model(name)
    report = mg.plan_memory(m.graph, mg.MemoryOptions(planner="refcount", inplace=True))
    ex = mg.Executor(m.graph, report.plan, device="gpu")
    ex.load(_feeds(m))
    ex.step(step=0)                          # kernels compiled outside the guard
    with cupyx.allow_synchronize(False):     # a device-to-host copy would synchronise
        for k in range(1, 4):
            ex.step(step=k)
    loss = float(ex.step(step=4)[m.loss])
    assert np.isfinite(loss)


def test_gpu_fed_label_out_of_range_is_a_feed_error_before_any_kernel():
    m = get_model("mlp")
    report = mg.plan_memory(m.graph, mg.MemoryOptions(planner="refcount"))
    feeds = _feeds(m)
    label = next(n for n, v in feeds.items() if v.dtype.kind in "iu")
    bad = feeds[label].copy()
    bad.reshape(-1)[3] = 10_000
    with pytest.raises(FeedError, match=rf"feed '{label}'.*10000 at position"):
        mg.Executor(m.graph, report.plan, device="gpu").run({**feeds, label: bad})


def test_gpu_allocation_error_names_the_buffer_before_allocating():
    import cupy
    free, total = cupy.cuda.Device().mem_info
    rows = int(total // (4 * 4096)) + 1                 # one tensor alone exceeds the GPU
    with mg.name_scope():
        x = mg.input("x", (rows, 4096))
        g = mg.Graph([mg.relu(x)], name="too_big")
    feeds = {"x": np.broadcast_to(np.float32(0), (rows, 4096))}   # a view: no host memory
    with pytest.raises(AllocationError, match="on the gpu"):
        mg.Executor(g, device="gpu").run(feeds)


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_gpu_dtr_under_budget_matches_the_planned_run(name):
    m = get_model(name)
    feeds = _feeds(m)
    ref = mg.Executor(m.graph, device="gpu").run(feeds)
    ex = mg.DTRExecutor(m.graph, ratio=0.8, device="gpu")
    out = ex.run(feeds)
    assert ex.last_trace.budget < ex.last_trace.peak       # below the no-remat arena
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


# --- the GPU's own kernels against their NumPy twins -------------------------------------

@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((4, 5, 7), (4, 7, 3)),
                                    ((5, 7), (4, 7, 3)), ((2, 3, 5, 7), (2, 3, 7, 3)),
                                    ((4, 5, 7), (7, 3)), ((0, 5, 7), (0, 7, 3)),
                                    ((5, 0), (0, 3))])
def test_gpu_matmul_into_equals_numpy(shapes, ta, tb):
    import cupy

    from minigraph.ops.cuda import matmul_into
    rng = np.random.default_rng(0)
    (sa, sb) = shapes
    a = rng.standard_normal(sa[:-2] + ((sa[-1], sa[-2]) if ta else sa[-2:]))
    b = rng.standard_normal(sb[:-2] + ((sb[-1], sb[-2]) if tb else sb[-2:]))
    want = np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)
    for dtype in ("float32", "float64"):
        out = cupy.full(want.shape, np.nan, dtype=dtype)
        matmul_into(cupy, cupy.asarray(a, dtype), cupy.asarray(b, dtype), out, ta, tb)
        np.testing.assert_allclose(out.get(), want, rtol=1e-4 if dtype == "float32" else 1e-12,
                                   atol=1e-5)


@pytest.mark.parametrize("geometry", [((2, 3, 7, 6), (3, 3), (1, 1), (1, 1)),
                                      ((1, 2, 8, 8), (3, 2), (2, 3), (1, 0)),
                                      ((3, 1, 5, 5), (1, 1), (2, 2), (0, 0)),
                                      ((2, 2, 4, 5), (4, 5), (1, 1), (2, 2))])
def test_gpu_im2col_col2im_equal_their_numpy_twins_bitwise(geometry):
    import cupy

    from minigraph.ops.conv import _col2im, _im2col, _out_hw
    shape, kernel, stride, padding = geometry
    attrs = {"kernel": kernel, "stride": stride, "padding": padding}
    ho, wo = _out_hw("t", [], shape, kernel, stride, padding)
    y_shape = (shape[0], 1, ho, wo)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    n, c = shape[:2]
    for inner in (False, True):
        cshape = ((c,) + kernel + (n, ho, wo)) if inner else ((n, c) + kernel + (ho, wo))
        want = np.full(cshape, np.nan, np.float32)
        _im2col(np, x, want, attrs, y_shape, batch_inner=inner)
        got = cupy.full(cshape, np.nan, np.float32)
        _im2col(cupy, cupy.asarray(x), got, attrs, y_shape, batch_inner=inner)
        np.testing.assert_array_equal(got.get(), want)
    cols = np.random.default_rng(2).standard_normal((n, c) + kernel + (ho, wo)).astype(
        np.float32)
    want = np.full(shape, np.nan, np.float32)
    _col2im(np, cols, want, attrs, y_shape)
    got = cupy.full(shape, np.nan, np.float32)
    _col2im(cupy, cupy.asarray(cols), got, attrs, y_shape)
    np.testing.assert_array_equal(got.get(), want)


def test_gpu_gelu_kernels_equal_their_numpy_twins():
    import cupy

    from minigraph.ops.registry import KernelContext, get_op
    rng = np.random.default_rng(3)
    x = (3 * rng.standard_normal((4, 257))).astype(np.float32)
    dy = rng.standard_normal((4, 257)).astype(np.float32)
    for op, ins in (("gelu", [x]), ("gelu_grad", [dy, x])):
        want = np.empty_like(x)
        get_op(op).forward(KernelContext(np, op), {}, ins, [want])
        got = cupy.empty(x.shape, np.float32)
        get_op(op).forward(KernelContext(cupy, op), {}, [cupy.asarray(a) for a in ins], [got])
        # float32 rounding of O(1) terms that cancel where x << 0: absolute 1e-5
        np.testing.assert_allclose(got.get(), want, rtol=1e-5, atol=1e-5, err_msg=op)


def test_gpu_row_kernels_equal_their_numpy_twins():
    # softmax, layer norm, batch norm and sum_to (ops/cuda_rows.py), the cases that
    # test_cuda_emulated.py runs on the CPU, here on the GPU itself; each kernel's scratch
    # within its declared GPU workspace.
    import cupy
    from row_kernel_cases import check_all
    failures = check_all(cupy, cupy.asarray, cupy.asnumpy)
    assert not failures, "\n".join(failures)
