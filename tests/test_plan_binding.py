"""A plan is bound to the graph it was made for (issue 15, point 1): its schedule, every
tensor's life and bytes, and which tensors are external. The Executor and DTR refuse any
other graph or schedule with a PlanError that names the first difference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from graphgen import bytes_equal, feeds_for

import minigraph as mg
from minigraph.examples import named
from minigraph.memory import Buffer, planners
from minigraph.memory.liveness import Liveness
from minigraph.runtime.dtr import DTRExecutor, simulate

REFCOUNT = mg.MemoryOptions(planner="refcount", alignment=1)


def _mean_graph(axis: int) -> mg.Graph:
    """x [8, 64] -> h1 = mean(x, axis) -> sum(tanh(h1)): same names, h1 of 256 or 32 bytes."""
    with mg.name_scope():
        x = mg.input("x", (8, 64))
        h1 = named(mg.mean(x, axis=axis, keepdims=True), "h1")
        return mg.Graph([named(mg.sum(mg.tanh(h1)), "out")])


def _diamond(b_reads_a: bool) -> mg.Graph:
    """Nodes b, a, c in that program order; in the second graph b reads a (same names)."""
    with mg.name_scope():
        x = mg.input("x", (4, 4))
        if b_reads_a:
            a = named(mg.tanh(x), "a")
            b = named(mg.exp(a), "b")
        else:
            b = named(mg.exp(x), "b")
            a = named(mg.tanh(x), "a")
        return mg.Graph([named(mg.sum(mg.add(a, b)), "c")])


def test_a_plan_runs_only_on_the_graph_it_was_made_for():
    g_a, g_b = _mean_graph(0), _mean_graph(1)
    plan_a = mg.plan_memory(g_a, REFCOUNT).plan
    assert set(plan_a.offsets) <= set(g_b.tensors)          # the names all match
    for validate in (True, False):
        with pytest.raises(mg.PlanError, match="plan was made for tensor h1 of 256 bytes; "
                                               "this graph's h1 has 32"):
            mg.Executor(g_b, plan_a, validate=validate)
    feeds = feeds_for(g_a)
    assert bytes_equal(mg.Executor(g_a).run(feeds), mg.Executor(g_a, plan_a).run(feeds))


def test_a_schedule_valid_only_for_another_graph_is_refused():
    g_a, g_b = _diamond(False), _diamond(True)
    plan_a = mg.plan_memory(g_a, REFCOUNT).plan
    assert plan_a.schedule.index("b") < plan_a.schedule.index("a")
    with pytest.raises(mg.PlanError, match="schedule runs b .* before a"):
        mg.Executor(g_b, plan_a)
    # DTR takes a schedule too: the same refusal, a PlanError (ScheduleError)
    with pytest.raises(mg.PlanError, match="schedule runs b"):
        DTRExecutor(g_b, ratio=1.0, schedule=plan_a.schedule)
    with pytest.raises(mg.PlanError, match="schedule runs b"):
        simulate(g_b, ratio=1.0, schedule=plan_a.schedule)


def test_a_schedule_names_the_first_node_this_graph_lacks_or_misses():
    g = _diamond(False)
    sched = list(mg.schedule(g))
    with pytest.raises(mg.PlanError, match="lists node X that this graph does not have"):
        mg.liveness(g, [*sched[:1], "X", *sched[1:]])
    with pytest.raises(mg.PlanError, match="lists node b twice"):
        mg.liveness(g, [*sched, "b"])
    with pytest.raises(mg.PlanError, match=f"misses node {sched[-1]}"):
        DTRExecutor(g, ratio=1.0, schedule=sched[:-1])
    with pytest.raises(mg.GraphError):                      # still a GraphError too
        mg.liveness(g, sched[:-1])


def test_a_plan_with_understated_sizes_fails_validate():
    g = _mean_graph(0)
    plan = mg.plan_memory(g, REFCOUNT).plan
    live = plan.liveness
    small = Liveness(live.schedule, live.alignment, {
        n: dataclasses.replace(iv, bytes=iv.bytes // 4) if iv.planned else iv
        for n, iv in live.intervals.items()})
    bufs = [Buffer(iv.name, iv.start, iv.end, iv.bytes) for iv in small.planned()]
    _, placed = planners.plan_buffers(bufs, "refcount", 1)
    under = dataclasses.replace(plan, liveness=small, offsets=dict(placed.offsets),
                                arena_bytes=placed.arena_bytes)
    with pytest.raises(mg.PlanError, match="h1 of 64 bytes; this graph's h1 has 256"):
        under.validate()                    # against the graph it was planned for
    hand_made = mg.MemoryPlan(small, dict(placed.offsets), placed.arena_bytes)
    hand_made.validate()                    # no graph: its own numbers are all it has
    for validate in (True, False):          # ... but no graph will run it
        with pytest.raises(mg.PlanError, match="h1 of 64 bytes"):
            mg.Executor(g, hand_made, validate=validate)
        with pytest.raises(mg.PlanError, match="h1 of 64 bytes"):
            hand_made.validate(g)


def test_offsets_may_not_list_a_graph_input():
    g = _mean_graph(0)
    plan = mg.plan_memory(g, REFCOUNT).plan
    bad = dataclasses.replace(plan, offsets={**plan.offsets, "x": 0},
                              arena_bytes=max(plan.arena_bytes, 8 * 64 * 4))
    for validate in (True, False):
        with pytest.raises(mg.PlanError, match="offsets list graph input x"):
            mg.Executor(g, bad, validate=validate)
    with pytest.raises(mg.PlanError, match="offsets list graph output out"):
        dataclasses.replace(plan, offsets={**plan.offsets, "out": 0}).validate()
    with pytest.raises(mg.PlanError, match="offsets list nope"):
        dataclasses.replace(plan, offsets={**plan.offsets, "nope": 0}).validate()


def test_a_plan_from_another_graph_with_extra_or_missing_tensors_is_refused():
    with mg.name_scope():
        x = mg.input("x", (8, 64))
        g_small = mg.Graph([named(mg.sum(mg.tanh(x)), "out")])
    g = _mean_graph(0)
    plan = mg.plan_memory(g, REFCOUNT).plan
    with pytest.raises(mg.PlanError, match="this graph does not have"):
        mg.Executor(g_small, plan)
    with pytest.raises(mg.PlanError):
        mg.Executor(g, mg.plan_memory(g_small, REFCOUNT).plan)


def test_a_plan_is_accepted_by_a_rebuilt_copy_of_its_graph():
    plan = mg.plan_memory(_mean_graph(0), REFCOUNT.replace(inplace=True)).plan
    g = _mean_graph(0)                      # a new Graph object, the same graph
    feeds = {"x": np.ones((8, 64), np.float32)}
    assert bytes_equal(mg.Executor(g).run(feeds), mg.Executor(g, plan).run(feeds))
