"""Lesson 07d's exercise check accepts the right answer and rejects wrong ones without
stating the answer."""

from __future__ import annotations

import itertools

from minigraph.lessons import l07d
from minigraph.memory.liveness import liveness
from minigraph.memory.swap import choose_swaps


def _right_1() -> list[str]:
    """The textbook's greedy choice at the exercise's budget: the answer."""
    bufs, steps, seconds = l07d._problem()
    return [s.tensor for s in choose_swaps(bufs, steps, seconds, l07d.MACHINE_1,
                                           l07d.exercise_1_budget(), {b.id for b in bufs})]


def test_exercise_1_the_greedy_choice_is_right_and_the_only_one_of_up_to_three_tensors():
    right = _right_1()
    assert l07d.exercise_1_budget() < liveness(l07d.exercise_1_graph()).theoretical_minimum()
    ok, why = l07d.exercise_1(right)
    assert ok and "host memory" in why
    names = [b.id for b in l07d._problem()[0]]
    passing = [c for r in (1, 2, 3) for c in itertools.combinations(names, r)
               if l07d.exercise_1(list(c))[0]]
    assert passing == [tuple(sorted(right, key=names.index))]


def test_exercise_1_wrong_answers_get_a_hint_not_the_answer():
    right = _right_1()
    for wrong in ([right[0]], [right[-1]], [b.id for b in l07d._problem()[0]], "x", 3,
                  ["nope"]):
        ok, why = l07d.exercise_1(wrong)
        assert not ok
        assert not all(r in why for r in right)
