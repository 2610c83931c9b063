"""Lesson 07's exercise checks accept the right answer and reject wrong ones without
stating the answer (issue 17, point 4); the student writes DTR's eviction loop
(exercise 1) and a score (exercise 2)."""

from __future__ import annotations

import math

import pytest

from minigraph.errors import BudgetError
from minigraph.examples import linear_chain
from minigraph.lessons import l07
from minigraph.runtime.dtr import budget_bounds
from minigraph.runtime.dtr.heuristics import dtr


def _place(dtr_run, nbytes):
    """minimal.py's own loop, as a student writes it."""
    while dtr_run.used + nbytes > dtr_run.budget:
        candidates = [t for t in dtr_run.resident if not dtr_run.pins[t]]
        if not candidates:
            raise BudgetError("nothing left to evict")
        dtr_run.evict(min(candidates, key=lambda t: dtr_run.score(dtr_run, t)))
    dtr_run.used += nbytes
    dtr_run.peak = max(dtr_run.peak, dtr_run.used)


def test_exercise_1_accepts_minimal_dtrs_loop():
    ok, why = l07.exercise_1(_place)
    assert ok, why


def _highest_first(dtr_run, nbytes):
    while dtr_run.used + nbytes > dtr_run.budget:
        candidates = [t for t in dtr_run.resident if not dtr_run.pins[t]]
        dtr_run.evict(max(candidates, key=lambda t: dtr_run.score(dtr_run, t)))
    dtr_run.used += nbytes
    dtr_run.peak = max(dtr_run.peak, dtr_run.used)


def _no_peak(dtr_run, nbytes):
    while dtr_run.used + nbytes > dtr_run.budget:
        candidates = [t for t in dtr_run.resident if not dtr_run.pins[t]]
        dtr_run.evict(min(candidates, key=lambda t: dtr_run.score(dtr_run, t)))
    dtr_run.used += nbytes


def _pinned_too(dtr_run, nbytes):
    while dtr_run.used + nbytes > dtr_run.budget:
        dtr_run.evict(min(dtr_run.resident, key=lambda t: dtr_run.score(dtr_run, t)))
    dtr_run.used += nbytes
    dtr_run.peak = max(dtr_run.peak, dtr_run.used)


@pytest.mark.parametrize("wrong,hint", [(_highest_first, "lowest"), (_no_peak, "peak"),
                                        (_pinned_too, "pinned")])
def test_exercise_1_refuses_a_wrong_loop_and_says_which_rule(wrong, hint):
    ok, why = l07.exercise_1(wrong)
    assert not ok and hint in why, why


def test_exercise_1_reports_an_unwritten_or_broken_loop():
    def unwritten(dtr_run, nbytes):
        raise NotImplementedError

    ok, why = l07.exercise_1(unwritten)
    assert not ok and "NotImplementedError" in why
    ok, why = l07.exercise_1(lambda d, n: d.no_such_field)
    assert not ok and "AttributeError" in why
    assert not l07.exercise_1(None)[0]


def test_exercise_2_accepts_a_score_that_beats_lru_and_rejects_others():
    ok, why = l07.exercise_2(dtr)
    assert ok and "lru" in why
    for weak in (lambda t, now: -t.staleness,          # LRU itself: not less than LRU
                 lambda t, now: t.staleness):          # most recently used first
        assert not l07.exercise_2(weak)[0]


def test_exercise_2_reports_an_unwritten_or_broken_score():
    def unwritten(t, now):
        raise NotImplementedError

    ok, why = l07.exercise_2(unwritten)
    assert not ok and "NotImplementedError" in why
    ok, why = l07.exercise_2(lambda t, now: t.no_such_property)
    assert not ok and "AttributeError" in why
    assert not l07.exercise_2("dtr")[0] and not l07.exercise_2(3)[0]


def test_exercise_3_chain_lower_bound_in_units():
    truth = budget_bounds(linear_chain(7), costs="unit", alignment=1).lower // l07.UNIT
    assert l07.exercise_3(truth)[0]
    for wrong in (truth - 1, truth + 1, str(truth), truth * l07.UNIT, None):
        ok, why = l07.exercise_3(wrong)
        assert not ok and str(truth) not in why


def test_the_chain_of_exercise_2_is_the_papers_sqrt_n_budget():
    assert l07.CHAIN == 200 and int(math.sqrt(l07.CHAIN)) == 14
