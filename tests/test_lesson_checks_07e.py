"""Lesson 07e's exercise check accepts Checkmate's proven optimum at the exercise's
budget and rejects other numbers (DTR's, a too-small one, a larger one) without giving
the optimum."""

from __future__ import annotations

from minigraph.dtr_research import checkmate
from minigraph.lessons import l07e
from minigraph.runtime.dtr import simulate


def test_exercise_1_the_least_compute_within_the_budget():
    g, kw = l07e.exercise_1_graph(), l07e.COUNTING
    opt = checkmate(g, ratio=l07e.EXERCISE_1_RATIO, node_limit=l07e.NODES, time_limit=120,
                    **kw)
    assert opt.optimal
    dtr = simulate(g, ratio=l07e.EXERCISE_1_RATIO, heuristic="dtr", **kw).overhead
    assert dtr > opt.overhead + 1e-3               # the exercise has a gap to find
    assert l07e.exercise_1(opt.overhead)[0]
    assert l07e.exercise_1(round(opt.overhead, 3))[0]
    shown = (f"{opt.overhead:.3f}", f"{opt.overhead:.2f}", f"{opt.overhead:g}")
    for wrong in (dtr, opt.overhead - 0.1, opt.overhead + 0.2, 1.0, 0.5, "1.3", True,
                  float("nan"), float("inf")):
        ok, why = l07e.exercise_1(wrong)
        assert not ok
        assert not any(s in why for s in shown)


def test_the_answer_fits_the_lessons_reasoning():
    """The exercise can be reasoned out from the table: the optimum at a larger budget
    whose schedule needs no more than this budget."""
    g, kw = l07e.exercise_1_graph(), l07e.COUNTING
    near = checkmate(g, ratio=0.6, node_limit=l07e.NODES, time_limit=120, **kw)
    here = checkmate(g, ratio=l07e.EXERCISE_1_RATIO, node_limit=l07e.NODES,
                     time_limit=120, **kw)
    assert near.optimal and here.optimal and near.peak <= here.budget
    assert here.overhead == near.overhead
