"""Lesson 02's exercise checks (minigraph/lessons/l02.py) accept the right answer, refuse a
wrong one, and never state the answer in the refusal."""

from __future__ import annotations

import pytest

import minigraph as mg
from minigraph import examples
from minigraph.lessons import l02


def test_exercise_1_is_t2s_life_under_the_other_order():
    live = mg.liveness(l02.blog_graph(), l02.OTHER_ORDER)
    right = (live.intervals["T2"].start, live.intervals["T2"].end)
    assert right == (2, 3)                     # Op2 now runs third, Op4 reads T2 last
    assert l02.exercise_1(right)[0]
    assert l02.exercise_1(list(right))[0]
    for wrong in ((1, 3), (2, 2), (1, 2), "2..3", None):
        ok, why = l02.exercise_1(wrong)
        assert not ok and "(2, 3)" not in why and "2..3" not in why.replace(repr(wrong), "")


def test_exercise_1_uses_the_lessons_graph():
    # l02.blog_graph() must be the graph the lesson builds (the same four ops)
    g = l02.blog_graph()
    assert [n.op for n in g.nodes] == ["relu", "tanh", "transpose", "add"]
    assert [n.outputs[0] for n in g.nodes] == ["T1", "T2", "T3", "Output"]


def test_exercise_2_is_the_sigmoid_chains_minimum():
    right = mg.liveness(examples.sigmoid_chain(5, shape=(4, 8)), alignment=1) \
        .theoretical_minimum()
    assert right == 256                        # two 128-byte outputs alive at each step
    assert l02.exercise_2(right)[0]
    for wrong in (128, 384, 640, "256"):
        ok, why = l02.exercise_2(wrong)
        assert not ok and "256" not in why


@pytest.mark.parametrize("wrong", ["fc1", "act1", "W1_new", "nope"])
def test_exercise_3_is_a_node_at_the_peak_step(wrong):
    live = mg.liveness(examples.two_layer_mlp()[0], alignment=1)
    per_step = live.live_bytes()
    peak = [n for n, b in zip(live.schedule, per_step) if b == max(per_step)]
    assert peak == ["matmul_5"]                # d(W1) = x^T d(fc1)
    assert l02.exercise_3(peak[0])[0]
    ok, why = l02.exercise_3(wrong)
    assert not ok and "matmul_5" not in why


def _my_intervals(graph, schedule):
    pos = {n: k for k, n in enumerate(schedule)}
    out = {}
    for name, t in graph.tensors.items():
        if t.kind in ("activation", "gradient") and name not in graph.outputs:
            start = pos[t.producer]
            out[name] = (start, max((pos[c] for c in graph.consumers[name]), default=start))
    return out


def test_exercise_4_accepts_liveness_written_from_its_rules():
    ok, why = l02.exercise_4(_my_intervals)
    assert ok, why


@pytest.mark.parametrize("wrong,hint", [
    (lambda g, s: {k: (a, b - 1) for k, (a, b) in _my_intervals(g, s).items()}, "included"),
    (lambda g, s: {k: (a + 1, b) for k, (a, b) in _my_intervals(g, s).items()}, "produces"),
    (lambda g, s: {**_my_intervals(g, s), **{o: (0, 0) for o in g.outputs}}, "not planned"),
    (lambda g, s: dict(list(_my_intervals(g, s).items())[1:]), "missing"),
    (lambda g, s: 1 / 0, "ZeroDivisionError"),
])
def test_exercise_4_refuses_a_wrong_rule_and_names_the_rule(wrong, hint):
    ok, why = l02.exercise_4(wrong)
    assert not ok and hint in why, why
