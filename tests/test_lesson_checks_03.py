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


def _my_inplace_pairs(graph, live, one_operand=True):
    from minigraph.ops.registry import get_op
    pairs, taken_in, taken_out = [], set(), set()
    for step, name in enumerate(live.schedule):
        node = graph.node(name)
        for out_k, in_k in get_op(node.op).inplace:
            if out_k >= len(node.outputs) or in_k >= len(node.inputs):
                continue
            x, y = node.inputs[in_k], node.outputs[out_k]
            ix, iy = live.intervals[x], live.intervals[y]
            tx, ty = graph.tensors[x], graph.tensors[y]
            if x in taken_in or y in taken_out or not (ix.planned and iy.planned) or \
                    ix.end != step or ix.start >= step or tx.nbytes != ty.nbytes or \
                    tx.dtype != ty.dtype or (one_operand and node.inputs.count(x) != 1):
                continue
            pairs.append((x, y))
            taken_in.add(x)
            taken_out.add(y)
    return pairs


def test_exercise_4_accepts_the_rule_written_clause_by_clause():
    ok, why = l03.exercise_4(_my_inplace_pairs)
    assert ok, why


def test_exercise_4_refuses_a_missing_clause_and_says_which_one_breaks():
    ok, why = l03.exercise_4(lambda g, live: _my_inplace_pairs(g, live, one_operand=False))
    assert not ok and "operands" in why, why
    ok, why = l03.exercise_4(lambda g, live: _my_inplace_pairs(g, live)[1:])
    assert not ok and "missing" in why, why
    assert not l03.exercise_4("pairs")[0]
