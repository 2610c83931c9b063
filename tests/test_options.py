"""`MemoryOptions` refuses a bad value when it is made (issue 15, point 15), so the widget,
the CLI and the lessons all get the same typed message before any planning."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph.errors import GraphError, MinigraphError, PlanError
from minigraph.examples import mlp_training
from minigraph.memory.buffers import Buffer, validate_offsets
from minigraph.memory.orders import ORDERS, schedule


def small_graph() -> mg.Graph:
    return mlp_training(depth=2, width=8, batch=4)


@pytest.mark.parametrize("kw,words", [
    ({"alignment": 0}, "alignment must be >= 1, not 0"),
    ({"alignment": -512}, "alignment must be >= 1, not -512"),
    ({"alignment": 1.5}, "alignment must be an integer, not 1.5"),
    ({"alignment": 512.0}, "alignment must be an integer, not 512.0"),
    ({"alignment": "512"}, "alignment must be an integer, not '512'"),
    ({"alignment": True}, "alignment must be an integer, not True"),
    ({"alignment": None}, "alignment must be an integer, not None"),
    ({"colors": 0}, "colors must be >= 1, not 0"),
    ({"colors": -2}, "colors must be >= 1, not -2"),
    ({"colors": 2.0}, "colors must be an integer, not 2.0"),
    ({"order": "nope"}, "unknown order 'nope'; known: best, bfs"),
    ({"order": ["program"]}, "unknown order ['program']"),
    ({"planner_args": [("seed", 1)]}, "planner_args must be a dict"),
    ({"planner_args": None}, "planner_args must be a dict"),
    ({"planner_args": {1: 2}}, "planner_args must be a dict of option name"),
    ({"inplace": "yes"}, "inplace must be True, False or a rule ('last-reader', 'strict'), "
                         "not 'yes'"),
    ({"inplace": "STRICT"}, "not 'STRICT'"),
    ({"inplace": 1}, "inplace must be True, False or a rule"),
    ({"inplace": None}, "not None"),
    ({"planner": None}, "planner must be a name"),
])
def test_options_refuse_a_bad_value_when_made_and_name_it(kw, words):
    with pytest.raises(PlanError) as e:
        mg.MemoryOptions(**kw)
    assert words in str(e.value)
    assert isinstance(e.value, MinigraphError)


def test_options_refuse_a_bad_value_given_to_plan_memory_or_replace():
    g = small_graph()
    with pytest.raises(PlanError, match="alignment must be >= 1, not -512"):
        mg.plan_memory(g, alignment=-512)
    with pytest.raises(PlanError, match="colors must be >= 1, not 0"):
        mg.MemoryOptions().replace(colors=0)
    with pytest.raises(PlanError, match="no option 'sharing'; its options are inplace"):
        mg.plan_memory(g, mg.MemoryOptions(), sharing="colors")


def test_valid_options_are_kept_as_given():
    assert mg.MemoryOptions() == mg.MemoryOptions(inplace=False, planner="none", colors=1,
                                                  order="program", alignment=512,
                                                  planner_args={})
    o = mg.MemoryOptions(alignment=np.int64(256), colors=np.int32(2))
    assert (o.alignment, o.colors) == (256, 2) and type(o.alignment) is int
    assert mg.MemoryOptions(inplace=np.bool_(True)).inplace is True
    assert mg.MemoryOptions(inplace="last-reader") == mg.MemoryOptions(inplace=True)
    assert mg.MemoryOptions(inplace="strict").inplace == "strict"
    assert [mg.MemoryOptions(inplace=v).inplace_rule for v in (False, True, "strict")] == \
        [None, "last-reader", "strict"]
    for order in ORDERS:
        assert mg.MemoryOptions(order=order).order == order
    g = small_graph()
    a = mg.plan_memory(g, mg.MemoryOptions(planner="refcount", alignment=1))
    b = mg.plan_memory(g, mg.MemoryOptions(planner="refcount", alignment=np.int64(1)))
    assert a.plan.offsets == b.plan.offsets and a.arena_bytes == b.arena_bytes


def test_an_unknown_or_unhashable_order_is_a_graph_error():
    g = small_graph()
    for order in ("nope", ["program"]):
        with pytest.raises(GraphError, match="unknown order"):
            schedule(g, order)


def test_np_int64_offsets_are_accepted_by_the_validator():
    bufs = [Buffer("a", 0, 2, 8), Buffer("b", 1, 3, 8)]
    validate_offsets(bufs, {"a": np.int64(0), "b": np.int64(8)}, arena_bytes=16, alignment=8)
    validate_offsets(bufs, {"a": np.uint32(8), "b": 0})
    with pytest.raises(PlanError, match="overlap at step 1"):
        validate_offsets(bufs, {"a": np.int64(0), "b": np.int64(4)})
    for bad in (np.float64(0.0), 0.0, True, np.bool_(False), "0"):
        with pytest.raises(PlanError, match="is not an integer"):
            validate_offsets(bufs, {"a": bad, "b": 8})


def test_rewire_refuses_an_input_index_the_node_does_not_have():
    g = small_graph()
    add = next(n for n in g.nodes if n.op == "add")
    for bad in (2, 99, -1, "0", 0.0, True):           # -1 used to pick the last input
        with pytest.raises(GraphError, match=rf"rewire {add.name}: no input .*it has 2"):
            g.rewire(add.name, bad, add.inputs[0])
    assert g.rewire(add.name, np.int64(0), add.inputs[0]).node(add.name).inputs == add.inputs


def test_an_unknown_inplace_rule_is_refused_by_the_plan_and_the_rule_functions():
    from minigraph.memory.inplace import inplace_pairs, inplace_refusal
    g = small_graph()
    plan = mg.plan_memory(g, mg.MemoryOptions(planner="refcount", alignment=1,
                                              inplace=True)).plan
    live = plan.liveness
    with pytest.raises(PlanError, match="unknown in-place rule 'loose'"):
        inplace_pairs(g, live, rule="loose")
    with pytest.raises(PlanError, match="unknown in-place rule 'loose'"):
        inplace_refusal(g, live, *plan.inplace[0], rule="loose")
    plan.inplace_rule = "loose"
    with pytest.raises(PlanError, match="unknown in-place rule 'loose'"):
        plan.validate(g)
    plan.inplace_rule = None                      # hand-overs, but made "without in-place"
    with pytest.raises(PlanError, match="in-place rule is None"):
        plan.validate(g)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2", None])
def test_refcount_refuses_a_bad_match_range_and_names_it(bad):
    from minigraph.memory.instances import ge_worked_example
    from minigraph.memory.planners import plan_buffers
    with pytest.raises(PlanError, match=f"match_range must be an integer >= 0, not {bad!r}"):
        plan_buffers(ge_worked_example(), "refcount", 1, match_range=bad)


def test_plan_memory_places_by_one_of_three_strategies():
    from minigraph.memory.api import PLACE, MemoryOptions, strategy
    assert set(PLACE) == {"plain", "safe", "joint"}
    assert strategy(MemoryOptions()) == "plain"
    assert strategy(MemoryOptions(planner="bestfit", safe=True)) == "safe"
    assert strategy(MemoryOptions(planner="model-ilp")) == "joint"
    with pytest.raises(PlanError, match="safe=True cannot be combined with joint planner"):
        strategy(MemoryOptions(planner="model-ilp", safe=True))
