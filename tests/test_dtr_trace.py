"""Replaying op traces in the DTR simulator's JSON-lines format."""

from __future__ import annotations

import json

import pytest

from minigraph.dtr_research import SimrdOptions, parse_trace, replay_trace, write_trace
from minigraph.dtr_research.simrd_log import SimrdLogError
from minigraph.examples import mlp_training
from minigraph.runtime.dtr import program_from_graph, simulate
from minigraph.runtime.dtr.program import resolve_budget


def L(**kw):
    return json.dumps(kw)


HAND = [
    L(INSTRUCTION="CONSTANT", NAME="ignored"),          # before START: skipped
    L(INSTRUCTION="MEMORY", NAME="ignored", MEMORY="8"),
    L(INSTRUCTION="ANNOTATE", ANNOTATION="START"),
    L(INSTRUCTION="CONSTANT", NAME="w"),
    L(INSTRUCTION="MEMORY", NAME="w", MEMORY="400"),
    L(INSTRUCTION="CALL", NAME="conv", ARGS=["w"], RESULT=["a"], TIME="10"),
    L(INSTRUCTION="MEMORY", NAME="a", MEMORY="100"),
    L(INSTRUCTION="ALIAS", NAME="a", ALIAS="-1"),
    L(INSTRUCTION="CALL", NAME="split", ARGS=["a"], RESULT=["b", "c"], TIME="5"),
    L(INSTRUCTION="MEMORY", NAME="b", MEMORY="100"),
    L(INSTRUCTION="ALIAS", NAME="b", ALIAS="-1"),
    L(INSTRUCTION="MEMORY", NAME="c", MEMORY="100"),
    L(INSTRUCTION="ALIAS", NAME="c", ALIAS="-1"),
    L(INSTRUCTION="CALL", NAME="view", ARGS=["b"], RESULT=["v"], TIME="0"),
    L(INSTRUCTION="MEMORY", NAME="v", MEMORY="0"),
    L(INSTRUCTION="ALIAS", NAME="v", ALIAS="0"),
    L(INSTRUCTION="COPY", DST="a2", SRC="a"),
    L(INSTRUCTION="RELEASE", NAME="a"),
    L(INSTRUCTION="RELEASE", NAME="b"),
    L(INSTRUCTION="ANNOTATE", ANNOTATION="BACKWARD"),
    L(INSTRUCTION="CALL", NAME="mul", ARGS=["v", "c"], RESULT=["d"], TIME="7"),
    L(INSTRUCTION="MEMORY", NAME="d", MEMORY="100"),
    L(INSTRUCTION="ALIAS", NAME="d", ALIAS="-1"),
    L(INSTRUCTION="MUTATE", NAME="add_", ARGS=["d", "a2"], MUTATE=[0], TIME="3"),
    L(INSTRUCTION="COPY_FROM", DST="c", SRC="d"),
    L(INSTRUCTION="RELEASE", NAME="v"),
    L(INSTRUCTION="RELEASE", NAME="a2"),
    L(INSTRUCTION="RELEASE", NAME="c"),
]


def test_a_hand_written_trace_parses_into_calls_releases_and_outputs():
    p = parse_trace(HAND)
    names = [t.name for t in p.tensors]
    assert "ignored" not in names and "w" in names and "d$" in names
    assert [op.name.split("#")[0] for op in p.ops] == ["constant", "conv", "split", "view",
                                                        "mul", "add_"]
    assert p.ops[4].role == "backward" and p.ops[1].role == "forward"
    v = p.index["v"]
    assert p.tensors[v].size == 0 and p.index["b"] in p.ops[4].inputs   # a view reads b
    assert p.storage[v] == p.index["b"]
    assert p.base_cost == 25
    gets = [p.tensors[t].name for s, t in p.steps if s == "get"]
    assert gets == ["d$"]             # the only tensor still referenced at the end
    # the constant is an op of its own at its line, never released, never evicted
    w = p.index["w"]
    assert p.tensors[w].size == 400 and p.arena[w] and not p.replayable[w]
    assert ("release", w) not in p.steps


def test_a_trace_budget_is_the_authors_by_default():
    """replay_trace(log, ratio=r): r x the baseline peak, constants included (by hand)."""
    p = parse_trace(HAND)
    # live bytes after each op, as the authors' unbudgeted run counts them: w 400;
    # a 500; b, c 700; v (a view) 700; d 800; d$ 900; then releases only. Peak 900.
    assert p.baseline_peak == 900
    assert resolve_budget(p, None, 0.5, "baseline") == 450
    assert replay_trace(HAND, ratio=0.8).budget == 720
    assert replay_trace(HAND, ratio=1.0, allocator="ideal").overhead == 1.0
    assert replay_trace(HAND, 900).budget == 900                        # bytes, as given
    # the old reading: constants 0 bytes outside the arena, ratio of the first-fit arena
    # peak: a at 0, b at 100, c at 200, d at 300, d$ at 400: 500 bytes; 0.5 x 500
    q = parse_trace(HAND, constants="outside")
    assert (q.bounds().peak, q.bounds().external) == (500, 0)
    assert resolve_budget(q, None, 0.5, "total") == 250
    old = replay_trace(HAND, ratio=1.0, constants="outside", ratio_of="total")
    assert (old.budget, old.overhead) == (500, 1.0)
    with pytest.raises(SimrdLogError, match="constants must be"):
        parse_trace(HAND, constants="ignored")


def test_a_constant_appearing_mid_run_is_there_only_from_its_line():
    lines = HAND[:3] + [L(INSTRUCTION="CALL", NAME="f", ARGS=[], RESULT=["x"], TIME="1"),
                        L(INSTRUCTION="MEMORY", NAME="x", MEMORY="300"),
                        L(INSTRUCTION="ALIAS", NAME="x", ALIAS="-1"),
                        L(INSTRUCTION="RELEASE", NAME="x"),
                        L(INSTRUCTION="CONSTANT", NAME="k"),
                        L(INSTRUCTION="MEMORY", NAME="k", MEMORY="200"),
                        L(INSTRUCTION="CALL", NAME="g", ARGS=["k"], RESULT=["y"], TIME="1"),
                        L(INSTRUCTION="MEMORY", NAME="y", MEMORY="100"),
                        L(INSTRUCTION="ALIAS", NAME="y", ALIAS="-1"),
                        L(INSTRUCTION="RELEASE", NAME="y")]
    p = parse_trace(lines)
    # x (300) is gone when k (200) comes; g holds k and y: 300. Had k been there from the
    # start, f would need 500.
    assert p.baseline_peak == 300 and p.bounds().lower == 300
    assert replay_trace(p, 300).overhead == 1.0


def test_a_hand_written_trace_replays_under_tight_budgets():
    p = parse_trace(HAND)
    full = replay_trace(p, ratio=1.0, allocator="ideal")
    assert full.overhead == 1.0
    tight = replay_trace(p, p.bounds().lower)
    assert tight.total_cost >= full.total_cost


def test_malformed_traces_are_refused_with_the_line():
    with pytest.raises(SimrdLogError, match="unknown tensor"):
        parse_trace([L(INSTRUCTION="RELEASE", NAME="x"),
                     L(INSTRUCTION="CALL", NAME="f", ARGS=["x"], RESULT=["y"], TIME="1")])
    with pytest.raises(SimrdLogError, match="expected MEMORY"):
        parse_trace([L(INSTRUCTION="CALL", NAME="f", ARGS=[], RESULT=["y"], TIME="1")])
    with pytest.raises(SimrdLogError, match="not JSON"):
        parse_trace(["{nope"])


def test_a_graph_written_as_a_trace_replays_with_the_same_costs(tmp_path):
    g = mlp_training(depth=3, width=16, batch=32)
    path = tmp_path / "mlp.log"
    lines = write_trace(g, path, costs="unit")
    assert json.loads(lines[0]) == {"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"}
    p = parse_trace(path)
    q = program_from_graph(g, alignment=1, costs="unit")
    assert p.base_cost == q.base_cost == len(g.nodes)
    # outputs are inside the budget in a trace (simrd), outside for a graph
    assert p.peak() >= q.peak()
    # the authors' baseline frees a constant at its RELEASE, their budgeted run pins it:
    # ratio 1.0 of it may evict; the live bytes with every constant pinned never do
    live = p.bounds().live
    assert live >= p.baseline_peak
    assert replay_trace(p, live, allocator="ideal").overhead == 1.0
    assert replay_trace(p, live, options=SimrdOptions()).overhead == 1.0
    assert simulate(q, ratio=1.0, allocator="ideal").overhead == 1.0
    tight = replay_trace(p, p.bounds().safe)
    assert tight.budget < p.peak() and tight.total_cost >= tight.base_cost
