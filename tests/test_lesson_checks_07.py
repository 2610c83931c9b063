"""Lesson 07's exercise checks accept the right answer and reject wrong ones without
stating the answer (issue 17, point 4)."""

from __future__ import annotations

from minigraph.examples import linear_chain
from minigraph.lessons import l07
from minigraph.runtime.dtr import budget_bounds
from minigraph.runtime.dtr.heuristics import dtr


def test_exercise_1_accepts_a_score_that_beats_lru_and_rejects_others():
    ok, why = l07.exercise_1(dtr)
    assert ok and "lru" in why
    for weak in (lambda t, now: -t.staleness,          # LRU itself: not less than LRU
                 lambda t, now: t.staleness):          # most recently used first
        assert not l07.exercise_1(weak)[0]


def test_exercise_1_reports_an_unwritten_or_broken_score():
    def unwritten(t, now):
        raise NotImplementedError

    ok, why = l07.exercise_1(unwritten)
    assert not ok and "NotImplementedError" in why
    ok, why = l07.exercise_1(lambda t, now: t.no_such_property)
    assert not ok and "AttributeError" in why
    assert not l07.exercise_1("dtr")[0] and not l07.exercise_1(3)[0]


def _right_2() -> str:
    """The one tensor whose eviction lets the output fit, found by trying each."""
    fits = []
    for k in l07.exercise_2_arena()[1]:
        arena, at = l07.exercise_2_arena()
        arena.free(at[k])
        if arena.can_fit(l07.REQUEST_2):
            fits.append(k)
    assert len(fits) == 1, f"exercise 2 must have one answer, not {fits}"
    return fits[0]


def test_exercise_2_one_eviction_makes_the_output_fit():
    right = _right_2()
    arena, at = l07.exercise_2_arena()
    assert arena.largest_free() < l07.REQUEST_2 and len(at) == 5
    assert l07.exercise_2(right)[0]
    for wrong in [k for k in at if k != right]:
        ok, why = l07.exercise_2(wrong)
        assert not ok and repr(right) not in why and f" {right} " not in why
    for unknown in ("q", "t", None, 3):        # freed or never there: the names are listed
        assert not l07.exercise_2(unknown)[0]


def test_exercise_3_chain_lower_bound_in_units():
    truth = budget_bounds(linear_chain(7), costs="unit", alignment=1).lower // l07.UNIT
    assert l07.exercise_3(truth)[0]
    for wrong in (truth - 1, truth + 1, str(truth), truth * l07.UNIT, None):
        ok, why = l07.exercise_3(wrong)
        assert not ok and str(truth) not in why

