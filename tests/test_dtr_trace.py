"""Replaying op traces in the DTR simulator's JSON-lines format."""

from __future__ import annotations

import json

import pytest

from minigraph.examples import mlp_training
from minigraph.runtime.dtr import (
    parse_trace,
    program_from_graph,
    replay_trace,
    simulate,
    write_trace,
)
from minigraph.runtime.dtr.trace import TraceError


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
    assert [op.name.split("#")[0] for op in p.ops] == ["conv", "split", "view", "mul", "add_"]
    assert p.ops[3].role == "backward" and p.ops[0].role == "forward"
    v = p.index["v"]
    assert p.tensors[v].size == 0 and p.index["b"] in p.ops[3].inputs   # a view reads b
    assert p.base_cost == 25
    gets = [p.tensors[t].name for s, t in p.steps if s == "get"]
    assert gets == ["d$"]             # the only tensor still referenced at the end


def test_a_hand_written_trace_replays_under_tight_budgets():
    p = parse_trace(HAND)
    full = replay_trace(p, ratio=1.0)
    assert full.overhead == 1.0
    tight = replay_trace(p, p.bounds().lower)
    assert tight.total_cost >= full.total_cost


def test_malformed_traces_are_refused_with_the_line():
    with pytest.raises(TraceError, match="unknown tensor"):
        parse_trace([L(INSTRUCTION="RELEASE", NAME="x"),
                     L(INSTRUCTION="CALL", NAME="f", ARGS=["x"], RESULT=["y"], TIME="1")])
    with pytest.raises(TraceError, match="expected MEMORY"):
        parse_trace([L(INSTRUCTION="CALL", NAME="f", ARGS=[], RESULT=["y"], TIME="1")])
    with pytest.raises(TraceError, match="not JSON"):
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
    assert replay_trace(p, ratio=1.0, allocator="ideal").overhead == 1.0
    assert simulate(q, ratio=1.0, allocator="ideal").overhead == 1.0
    tight = replay_trace(p, p.bounds().safe)
    assert tight.budget < p.peak() and tight.total_cost >= tight.base_cost
