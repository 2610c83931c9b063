"""MODeL's joint program [Steiner 2023]: the order and the offsets chosen together
(`minigraph/memory/planners/joint.py`, planner "model-ilp" of `JOINT_PLANNERS`)."""

from __future__ import annotations

import pytest
from fake_clock import ticking, within
from graphgen import bytes_equal, feeds_for, random_graph

import minigraph as mg
from minigraph import examples
from minigraph.errors import PlanError
from minigraph.feeds import random_feeds
from minigraph.memory import validate_offsets
from minigraph.memory.liveness import liveness
from minigraph.memory.planners import JOINT_PLANNERS, PLANNERS, plan_buffers
from minigraph.memory.planners.joint import MAX_NODES, plan_joint
from minigraph.memory.topo import BEST_OF
from minigraph.models import get_model

JOINT = mg.MemoryOptions(planner="model-ilp")


def fixed_order_optimum(graph, orders=(*BEST_OF, "best"), alignment=512):
    """The smallest arena of the exact fixed-order ILP over the named orders."""
    return min(mg.plan_memory(graph, order=o, planner="ilp", alignment=alignment,
                              planner_args={"time_limit": 10.0}).arena_bytes
               for o in orders)


def test_registered_as_a_joint_planner_not_a_buffer_planner():
    assert "model-ilp" in JOINT_PLANNERS and "model-ilp" not in PLANNERS
    with pytest.raises(PlanError, match="chooses the schedule too"):
        plan_buffers([mg.Buffer("a", 0, 1, 8)], "model-ilp")


def test_order_trap_by_hand():
    """Units of 512 B (128 float32): R1 = 1, R2 = 3, L1 = 4, L2 = 1; J (the output) is not
    planned. Lives under R1 R2 L1 L2 J (program, DFS, reverse DFS, GE, memory-greedy):
    R1 0-1, R2 1-4, L1 2-3, L2 3-4; at step 3 R2 + L1 + L2 = 3 + 4 + 1 = 8 units = 4096 B.
    Under R1 L1 R2 L2 J (BFS): R1 0-2, L1 1-3, R2 2-4, L2 3-4; at step 2 1 + 4 + 3 = 8
    again. No layout goes below the live bytes of a step, and the fixed-order ILP reaches
    them: 4096 B for every order of the registry.
    Under L1 L2 R1 R2 J: L1 0-1, L2 1-4, R1 2-3, R2 3-4; the steps hold 4, 5, 2, 5, 4
    units, so 5 units = 2560 B is the least; it is reached with L2 at 0, L1 on top of it
    (512-2560), R1 at 512 and R2 on top (1024-2560): L1 is dead before R1 is born. Node L2
    reads L1 (4) and writes L2 (1), so no order goes below 5 units: 2560 B is optimal."""
    g = examples.order_trap()
    assert fixed_order_optimum(g) == 8 * 512
    for o in BEST_OF:
        assert mg.plan_memory(g, order=o).theoretical_minimum == 8 * 512
    rep = mg.plan_memory(g, JOINT)
    assert rep.arena_bytes == 5 * 512
    assert rep.plan.schedule == ("L1", "L2", "R1", "R2", "J")
    assert rep.plan.note.startswith("optimal over every order, bound 2560 B")
    assert "order chosen with the offsets" in rep.summary()
    rep.plan.validate(g)


def test_ge_worked_graph_is_already_optimal_over_every_order():
    """The CANN article's example [Huawei GE]: node E reads D (512 B) and writes E
    (4096 B), so no order goes below 4608 B, and the program order's plan reaches it."""
    g = examples.ge_worked_graph()
    live = liveness(g).intervals
    assert [(live[t].start, live[t].end, live[t].bytes) for t in "ABCDE"] == [
        (0, 1, 1024), (1, 3, 2048), (2, 3, 1024), (3, 4, 512), (4, 5, 4096)]
    jp = plan_joint(g, alignment=512)
    assert jp.arena_bytes == jp.bound == jp.fixed_arena == 4608
    assert jp.note.startswith("optimal")


def test_zoo_mlp_beats_every_fixed_order():
    """The zoo MLP's training step: the best fixed-order ILP plan over the registry's
    orders is larger than the joint program's, which it proves optimal."""
    g = get_model("mlp").graph
    rep = mg.plan_memory(g, JOINT.replace(planner_args={"time_limit": 60.0}))
    assert rep.plan.note.startswith("optimal")
    assert rep.arena_bytes < fixed_order_optimum(g)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_best_of_every_topological_order_on_tiny_random_graphs(seed):
    """Every topological order of a 5-op random graph, each planned by the exact
    fixed-order ILP: the joint program's proved optimum is the smallest of them."""
    g = random_graph(seed, n_ops=5)
    orders = _all_orders(g)
    assert len(orders) > 1
    best = min(plan_buffers(liveness(g, o, 1).buffers(), "ilp", 1, time_limit=600.0,
                            node_limit=20_000)[1].arena_bytes for o in orders)
    jp = plan_joint(g, alignment=1, time_limit=30.0)
    assert jp.note.startswith("optimal") and jp.arena_bytes == best == jp.bound


def _all_orders(g):
    preds = {n.name: {g.tensors[i].producer for i in n.inputs} - {None} | set(n.deps)
             for n in g.nodes}
    out = []

    def walk(done, order):
        if len(order) == len(preds):
            out.append(list(order))
            return
        for v in preds:
            if v not in done and preds[v] <= done:
                walk(done | {v}, order + [v])
    walk(frozenset(), [])
    return out


@pytest.mark.parametrize("make", [examples.order_trap, examples.ge_worked_graph,
                                  lambda: get_model("mlp").graph,
                                  lambda: random_graph(3, n_ops=10),
                                  lambda: random_graph(4, n_ops=8, train=True)])
def test_arena_run_equals_the_unplanned_run(make):
    g = make()
    if len(g.nodes) > MAX_NODES:
        pytest.skip("too large for the joint program")
    feeds = feeds_for(g, 0) if g.name.startswith("random") else random_feeds(g)
    rep = mg.plan_memory(g, JOINT.replace(planner_args={"time_limit": 5.0}))
    assert rep.plan.schedule == tuple(rep.plan.liveness.schedule)
    rep.plan.validate(g)
    assert bytes_equal(mg.Executor(g).run(feeds), mg.Executor(g, rep.plan).run(feeds))


def test_a_graph_too_large_is_refused_naming_its_size_and_the_limit():
    g = get_model("cnn").graph
    assert len(g.nodes) > MAX_NODES
    with pytest.raises(PlanError, match=rf"{len(g.nodes)} nodes, more than the {MAX_NODES}"):
        mg.plan_memory(g, JOINT)


@pytest.mark.parametrize("change, match", [
    ({"inplace": True}, "inplace=True"),
    ({"colors": 2}, "colors=2"),
    ({"planner_args": {"seed": 1}}, "no option 'seed'; its options are time_limit"),
    ({"planner_args": {"time_limit": 0}}, "time_limit"),
    ({"planner_args": {"time_limit": float("nan")}}, "time_limit"),
])
def test_options_it_cannot_honour_are_refused(change, match):
    with pytest.raises(PlanError, match=match):
        mg.plan_memory(examples.order_trap(), JOINT.replace(**change))


def test_the_time_limit_covers_the_whole_call_and_the_gap_is_reported():
    """A 30-node training graph that the program does not prove in a fraction of a
    second: the call still ends on time, with a valid plan no larger than the best
    fixed-order heuristic plan it started from, and its gap to the bound in the note."""
    import scipy.optimize  # noqa: F401  (its first import, about a second, is not measured)
    g = examples.mlp_training(depth=3, width=8, batch=2)
    assert len(g.nodes) == 30
    with ticking() as clock:
        jp = plan_joint(g, alignment=512, time_limit=0.5)
    assert within(clock, 0.5), clock.t
    assert jp.bound <= jp.arena_bytes <= jp.fixed_arena
    if jp.arena_bytes > jp.bound:
        gap = 100.0 * (jp.arena_bytes - jp.bound) / jp.arena_bytes
        assert jp.note.startswith(f"gap {gap:.1f}% over every order, bound {jp.bound} B")
    else:
        assert jp.note.startswith("optimal")
    buffers = liveness(g, jp.schedule, 512).buffers()
    validate_offsets(buffers, jp.offsets, alignment=512)
