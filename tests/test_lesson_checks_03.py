"""Lesson 03's exercise checks (minigraph/lessons/l03.py) accept the right answer, refuse a
wrong one, and never state the answer in the refusal."""

from __future__ import annotations

import minigraph as mg
from minigraph import examples
from minigraph.examples import named
from minigraph.lessons import l03
from minigraph.memory.planners import plan_buffers


def test_exercise_1_wants_a_pair_only_the_last_reader_rule_takes_and_no_hazard():
    with mg.name_scope():                      # f = a * sigmoid(a): c's reader is f
        a = named(mg.tanh(mg.input("x", (4, 4))), "a")
        c = named(mg.sigmoid(a), "c")
        good = mg.Graph([mg.sum(named(mg.mul(a, c), "f"))])
    ok, why = l03.exercise_1(good)
    assert ok and "a -> f" in why
    # the counter-example: its extra pair (B -> F) is a hazard; the chain has no extra pair
    for wrong in (examples.inplace_counterexample(), examples.sigmoid_chain(3), "graph"):
        ok, why = l03.exercise_1(wrong)
        assert not ok and "->" not in why


def test_exercise_2_is_the_arena_with_match_range_1_and_2():
    bufs = l03.exercise_2_buffers()
    assert [b.size for b in bufs] == [1024, 2048, 1024, 2048, 4096]
    right = tuple(plan_buffers(bufs, "refcount", 1, match_range=m)[1].arena_bytes
                  for m in (1, 2))
    assert right == (9216, 7168)               # with 2, E grows B's 2048-byte block
    assert l03.exercise_2(right)[0]
    for wrong in ((9216, 9216), (7168, 7168), (8704, 5632), "9216", None):
        ok, why = l03.exercise_2(wrong)
        assert not ok and "9216" not in why.replace(repr(wrong), "") and "7168" not in \
            why.replace(repr(wrong), "")


def test_exercise_3_wants_a_relu_kept_out_of_place_by_another_clause():
    with mg.name_scope():                      # r is the graph output: not planned
        a = named(mg.tanh(mg.input("x", (4, 4))), "a")
        good = mg.Graph([named(mg.relu(a), "r")])
    assert l03.exercise_3(good)[0]
    for wrong in (examples.sigmoid_chain(3), examples.two_layer_mlp()[0], 7):
        ok, why = l03.exercise_3(wrong)
        assert not ok
