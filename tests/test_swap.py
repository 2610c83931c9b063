"""Memory swap (memory/swap.py, memory/swap_plan.py, runtime/swapping.py): split intervals
packed by every planner, validated by the one validator, run bitwise equal to the run
without swapping; the copy stream's time; bad input as one-line SwapErrors."""

from __future__ import annotations

import numpy as np
import pytest
from graphgen import bytes_equal

import minigraph as mg
from minigraph import models
from minigraph.errors import PlanError, SwapError
from minigraph.memory.planners import PLANNERS, options_for
from minigraph.memory.swap import Machine, Swap, copy_stream, window
from minigraph.memory.swap_plan import MACHINES, SwapPlan, lowest_swap_plan, plan_swap
from minigraph.runtime import swapping

ZOO = [m for m in models.MODELS if m != "resnet50"]


def _floor(g, opts=None, machine="pcie4"):
    return lowest_swap_plan(g, opts, machine=machine)


def _budget(g, opts):
    """Halfway between the swap floor and the no-swap minimum: no plan fits it unswapped."""
    base = mg.plan_memory(g, opts)
    low = _floor(g, opts).arena_bytes
    return base, (low + base.theoretical_minimum) // 2


def _plan_near(g, budget, opts):
    """A swap plan at `budget`, or (a planner that packs worse than greedy-size) at the
    best arena it said it reached, or at its own plain arena."""
    try:
        return plan_swap(g, budget, opts)
    except SwapError as e:
        said = e.minimum
    try:
        return plan_swap(g, said, opts)
    except SwapError:
        pass
    return plan_swap(g, mg.plan_memory(g, opts).arena_bytes, opts)


@pytest.mark.parametrize("name", ZOO)
def test_swap_plans_of_every_planner_run_bitwise_equal_to_the_run_without_swapping(name):
    model = models.get_model(name)
    g, feeds = model.graph, model.feeds(0)
    want = mg.Executor(g).run(feeds)
    ref = mg.MemoryOptions(planner="greedy-size")
    base, budget = _budget(g, ref)
    assert budget < base.theoretical_minimum
    for planner in sorted(PLANNERS):
        args = options_for(planner, {"time_limit": 0.05, "seed": 0})
        for inplace in (False, True):
            opts = mg.MemoryOptions(planner=planner, inplace=inplace, planner_args=args)
            report = _plan_near(g, budget, opts)
            assert isinstance(report.plan, SwapPlan), (planner, inplace)
            if report.arena_bytes < report.no_swap_minimum:
                assert report.swaps, (planner, inplace)
            report.plan.validate(g)
            out = mg.Executor(g, report).run(feeds)
            assert bytes_equal(out, want), (name, planner, inplace)


def test_a_swap_plan_really_reuses_the_front_bytes_skipping_the_offload_gives_wrong_numbers(
        monkeypatch):
    model = models.get_model("resnet")
    g, feeds = model.graph, model.feeds(0)
    want = mg.Executor(g).run(feeds)
    report = _floor(g, mg.MemoryOptions(planner="greedy-size"))
    assert bytes_equal(mg.Executor(g, report).run(feeds), want)
    monkeypatch.setattr(swapping.SwapSteps, "after", lambda self, k, arrays: None)
    with np.errstate(all="ignore"):         # the stale bytes may overflow
        assert not bytes_equal(mg.Executor(g, report).run(feeds), want)


def test_below_the_no_swap_minimum_a_swap_plan_runs_where_no_static_plan_can():
    model = models.get_model("transformer")
    g, feeds = model.graph, model.feeds(0)
    base = mg.plan_memory(g, mg.MemoryOptions(planner="bestfit"))
    budget = base.theoretical_minimum * 3 // 4      # no plan of this schedule fits
    report = plan_swap(g, budget, mg.MemoryOptions(planner="bestfit"))
    assert report.arena_bytes <= budget < base.theoretical_minimum
    assert report.no_swap_minimum == base.theoretical_minimum
    assert bytes_equal(mg.Executor(g, report).run(feeds), mg.Executor(g).run(feeds))
    fp = report.footprint
    assert fp.host == report.host_bytes == report.moved > 0 and fp.arena == report.arena_bytes


def test_a_budget_above_the_need_swaps_nothing_and_is_the_plain_plan():
    g = models.get_model("mlp").graph
    opts = mg.MemoryOptions(planner="greedy-size")
    plain = mg.plan_memory(g, opts)
    report = plan_swap(g, plain.arena_bytes, opts)
    assert report.swaps == [] and report.plan.offsets == plain.plan.offsets
    assert report.timing.seconds == report.timing.baseline


def test_the_validator_refuses_a_swap_whose_gap_holds_a_use():
    g = models.get_model("cnn").graph
    report = _floor(g, mg.MemoryOptions(planner="greedy-size"))
    plan = report.plan
    s = plan.swaps[0]
    plan.swaps[0] = Swap(s.tensor, s.bytes, s.after, s.until, s.back, s.reader + 1)
    with pytest.raises(PlanError, match=f"swap of {s.tensor}"):
        plan.validate(g)
    plan.swaps[0] = s
    ivs = plan.liveness.intervals
    other = next(n for n in plan.offsets if n not in plan.back_offsets and plan.size(n)
                 and ivs[n].start <= s.back <= ivs[n].end
                 and plan.offsets[n] + s.bytes <= plan.arena_bytes)
    plan.back_offsets[s.tensor] = plan.offsets[other]    # the back half over a live tensor
    with pytest.raises(PlanError, match=f"{other}.* overlap at step"):
        plan.validate(g)


def test_copy_stream_hides_a_transfer_that_fits_under_compute_and_waits_for_one_that_does_not():
    seconds = [1.0] * 8
    fast = Machine(bandwidth=1e9, latency=0.0)
    assert window(1, 7, seconds, 1.0) == (2, 6)      # one op covers each copy
    s = Swap("t", 10**9, 1, 2, 6, 7)                 # 1 s each way
    t = copy_stream(seconds, [s], fast)
    assert t.seconds == t.baseline == 8.0 and t.waits == {} and t.overhead == 0.0
    slow = Machine(bandwidth=0.5e9, latency=0.0)      # 2 s each way, still one op
    t = copy_stream(seconds, [s], slow)
    assert t.waits == {"t": pytest.approx(2.0)} and t.seconds == pytest.approx(10.0)
    assert window(1, 4, seconds, 1.0) is None         # a gap of two ops frees no step


def test_a_faster_link_hides_more_and_predicts_a_shorter_step():
    g = models.get_model("resnet", batch=8).graph
    opts = mg.MemoryOptions(planner="greedy-size")
    base = mg.plan_memory(g, opts)
    budget = base.arena_bytes * 2 // 3
    slow = plan_swap(g, budget, opts, machine=Machine(bandwidth=2e9))
    fast = plan_swap(g, budget, opts, machine=MACHINES["nvlink-c2c"])
    assert fast.timing.seconds <= slow.timing.seconds
    assert len(fast.hidden()) >= len(slow.hidden())
    assert fast.timing.baseline == slow.timing.baseline


@pytest.mark.parametrize("bad, match", [
    (dict(bandwidth=0), "bandwidth must be > 0, not 0"),
    (dict(bandwidth=-1e9), "bandwidth must be > 0, not -1000000000.0"),
    (dict(compute=0.0), "compute must be > 0"),
    (dict(latency=-1.0), "latency must be >= 0, not -1.0"),
])
def test_a_machine_with_a_rate_that_is_not_positive_is_a_one_line_swap_error(bad, match):
    with pytest.raises(SwapError, match=match) as e:
        Machine(**bad)
    assert "\n" not in str(e.value)


def test_bad_budgets_machines_and_host_limits_are_one_line_swap_errors():
    g = models.get_model("cnn").graph
    for budget, match in ((-1, "not -1"), ("big", "not 'big'"), (True, "not True"),
                          (0, "budget 0 B is below what swapping reaches")):
        with pytest.raises(SwapError, match=match) as e:
            plan_swap(g, budget)
        assert "\n" not in str(e.value)
    with pytest.raises(SwapError, match="unknown machine 'pcie9'"):
        plan_swap(g, 10**9, machine="pcie9")
    base = mg.plan_memory(g, mg.MemoryOptions(planner="greedy-size"))
    with pytest.raises(SwapError, match=r"host memory too small: .* host_limit is 100 B") as e:
        plan_swap(g, base.arena_bytes * 3 // 4, host_limit=100)
    assert "\n" not in str(e.value) and isinstance(e.value, PlanError)
    report = plan_swap(g, base.arena_bytes * 3 // 4, host_limit=10**9)
    assert report.host_bytes <= 10**9


def test_swap_plan_resident_steps_repeat_the_same_numbers():
    model = models.get_model("unet")
    g, feeds = model.graph, model.feeds(0)
    report = _floor(g, mg.MemoryOptions(planner="greedy-size", inplace=True))
    ex = mg.Executor(g, report)
    first = ex.run(feeds)
    ex.load(feeds)
    params = {p: feeds[p] for p in g.params}
    for _ in range(2):
        ex.load(feeds)
        out = {k: np.asarray(v).copy() for k, v in ex.step().items()}
        assert bytes_equal(out, first)
    assert params


def test_compare_counts_every_technique_in_one_accounting_at_one_budget():
    from minigraph.experiments.swap import compare
    g = models.get_model("resnet").graph
    rows = {r.technique: r for r in compare(g, 0.5)}
    assert set(rows) == {"static", "swap", "DTR", "DTR+swap"}
    assert rows["static"].device is None                     # half its memory: no
    for name in ("swap", "DTR", "DTR+swap"):
        r = rows[name]
        assert r.device is not None and r.device <= r.budget and r.seconds >= r.baseline
    assert rows["swap"].host == rows["swap"].moved > 0 and rows["DTR"].host == 0


def test_compare_s_dtr_swap_row_is_dtr_choosing_the_cheaper_at_the_same_budget():
    from minigraph.experiments.swap import compare
    from minigraph.memory.swap import op_seconds
    from minigraph.runtime.dtr import simulate
    g = models.get_model("resnet").graph
    sched = mg.plan_memory(g, mg.MemoryOptions(planner="greedy-size")).plan.schedule
    for link in ("pcie4", "nvlink-c2c"):
        row = {r.technique: r for r in compare(g, 0.5, link)}["DTR+swap"]
        secs = op_seconds(g, sched, MACHINES[link])
        t = simulate(g, row.budget, costs=dict(zip(sched, secs)), schedule=sched,
                     evict="cheaper", machine=MACHINES[link], cost_rate=1.0)
        assert t.swapped and row.host == t.host_peak > 0
        assert row.moved == (t.bytes_out, t.bytes_in) and row.seconds == t.total_cost
        assert row.device == t.max_used and row.baseline == sum(secs)


def test_fits_knows_dtr_swap_and_refuses_an_unknown_technique():
    from minigraph.experiments.swap import fits, largest_batch
    g = models.get_model("resnet").graph
    working = mg.plan_memory(g, mg.MemoryOptions(planner="greedy-size")).working_bytes
    assert fits("DTR+swap", g, working) and not fits("DTR+swap", g, 1024)
    build = lambda b: models.get_model("resnet", batch=b).graph  # noqa: E731
    assert largest_batch(build, 400_000, "DTR+swap", (1, 2, 4, 8)) >= \
        largest_batch(build, 400_000, "DTR", (1, 2, 4, 8))
    with pytest.raises(SwapError, match="'recompute'"):
        fits("recompute", g, working)


def test_the_gpu_swap_benchmark_runs_dry_on_numpy():
    from minigraph.experiments.swap_gpu import bench_swap, measure_link, summary
    link = measure_link("cpu", small=1 << 12, large=1 << 18, repeats=1)
    assert link["h2d_bandwidth"] > 0 and link["d2h_latency"] >= 0
    rows = bench_swap(models.get_model("resnet"), "cpu", repeats=1, warmup=0)
    assert rows["swap"]["arena"] < rows["no swap"]["arena"] and rows["swap"]["swapped"]
    text = summary(link, rows, None)
    assert "minigraph, swap" in text and "target: peak" in text


class _FakeCuda:
    """CuPy's stream, event and copy calls on the host, recorded: each copy runs at once
    (ctypes.memmove), so a wrong direction, address or size gives wrong numbers."""

    def __init__(self):
        self.log = []
        fake = self

        class Stream:
            ptr = 7

            def __init__(self, non_blocking=False):
                pass

            def wait_event(self, ev):
                fake.log.append(("wait", ev.on))

        class Event:
            def __init__(self, disable_timing=False):
                self.on = None

            def record(self, stream):
                self.on = "copy" if isinstance(stream, Stream) and stream is not fake.compute \
                    else "compute"

        class Runtime:
            @staticmethod
            def memcpyAsync(dst, src, n, kind, stream):
                import ctypes
                assert stream == Stream.ptr and kind in (1, 2)
                fake.log.append(("copy", kind, n))
                ctypes.memmove(dst, src, n)

        self.Stream, self.Event, self.runtime = Stream, Event, Runtime
        self.compute = Stream()

    def get_current_stream(self):
        return self.compute

    @staticmethod
    def alloc_pinned_memory(n):
        return bytearray(n)


def test_the_cupy_swap_path_copies_the_right_bytes_each_way_with_events(monkeypatch):
    model = models.get_model("transformer")
    g, feeds = model.graph, model.feeds(0)
    report = _floor(g, mg.MemoryOptions(planner="greedy-size"))
    ex = mg.Executor(g, report)
    fake = type("xp", (), {"cuda": _FakeCuda()})
    monkeypatch.setattr(swapping, "_ptr", lambda a: a.ctypes.data)
    ex._swap = swapping.SwapSteps(report.plan, g, fake, gpu=True)   # CuPy's calls, on NumPy
    assert bytes_equal(ex.run(feeds), mg.Executor(g).run(feeds))
    log = fake.cuda.log
    copies = [e for e in log if e[0] == "copy"]
    assert [k for _, k, _ in copies].count(2) == [k for _, k, _ in copies].count(1) \
        == len(report.swaps)
    assert sum(n for _, _, n in copies) == 2 * report.host_bytes
    waits = [e for e in log if e[0] == "wait"]
    assert ("wait", "compute") in waits and ("wait", "copy") in waits
