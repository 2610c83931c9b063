"""Lesson 06's exercise checks accept the right answer and refuse a wrong one, without
the lesson's cells holding the answer (issue 17 point 4)."""

from __future__ import annotations

import pytest

from minigraph.lessons import l06
from minigraph.memory import PLANNERS
from minigraph.memory.buffers import Placement
from minigraph.memory.planners.greedy import lowest_gap


def first_fit_by_start(buffers):
    """A student's answer to exercise 1, written from the exercise's words."""
    offsets, placed = {}, []
    for b in sorted(buffers, key=lambda b: b.start):
        taken = [(offsets[p.id], offsets[p.id] + p.size) for p in placed
                 if p.start <= b.end and b.start <= p.end]
        offsets[b.id] = lowest_gap(taken, b.size)
        placed.append(b)
    return Placement.of(buffers, offsets)


def largest_first(buffers):
    """Valid, but greedy by size: not first fit by start."""
    offsets, placed = {}, []
    for b in sorted(buffers, key=lambda b: -b.size):
        taken = [(offsets[p.id], offsets[p.id] + p.size) for p in placed
                 if p.start <= b.end and b.start <= p.end]
        offsets[b.id] = lowest_gap(taken, b.size)
        placed.append(b)
    return Placement.of(buffers, offsets)


def test_exercise_1_accepts_first_fit_by_start() -> None:
    ok, why = l06.exercise_1(first_fit_by_start)
    assert ok, why


@pytest.mark.parametrize("wrong", [
    largest_first,
    lambda buffers: Placement.of(buffers, {b.id: 0 for b in buffers}),     # overlaps
    lambda buffers: None,
    lambda buffers: 1 / 0,
    "first_fit_by_start",
])
def test_exercise_1_refuses_what_is_not_first_fit_by_start(wrong) -> None:
    ok, why = l06.exercise_1(wrong)
    assert not ok and why


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(PLANNERS, l06.PLANNER_NAME, first_fit_by_start)


def test_exercise_2_accepts_the_gap_and_refuses_another(registered) -> None:
    import minigraph as mg
    from minigraph.models import get_model
    rep = mg.plan_memory(get_model(l06.EXERCISE_2_MODEL).graph, inplace=True,
                         planner=l06.PLANNER_NAME)
    gap = 100 * (rep.arena_bytes - rep.theoretical_minimum) / rep.theoretical_minimum
    assert gap > 1, "the exercise needs a gap to find"
    ok, why = l06.exercise_2(round(gap, 2))
    assert ok, why
    for wrong in (0.0, round(100 + gap, 2), "a lot"):
        ok, why = l06.exercise_2(wrong)
        assert not ok and f"{gap:.1f}" not in why, (wrong, why)


def test_exercise_2_asks_for_the_registration_first(monkeypatch) -> None:
    monkeypatch.delitem(PLANNERS, l06.PLANNER_NAME, raising=False)
    ok, why = l06.exercise_2(10.0)
    assert not ok and "register" in why


def test_exercise_2_refuses_a_registered_planner_that_is_not_first_fit(monkeypatch) -> None:
    monkeypatch.setitem(PLANNERS, l06.PLANNER_NAME, largest_first)
    ok, why = l06.exercise_2(10.0)
    assert not ok and "exercise 1" in why
