"""A2's scale (issue 50): each score says what the work is worth.

Per case, a valid plan's points are a scale of its arena, linear in bytes, between three
marks (`planner_grader.marks`, `case_points`): no reuse's (the sum of the sizes: the
trivial answer) 0, the lessons' planners' (the better of greedy by size - the notebook's
hint - and best fit, lesson 06's `greedy.py` and `bestfit.py`) 60%, the reference's 100%.
The graded cases are those where the reference's arena is at least 2% below the lessons';
the others of the default set are checks only (a valid plan is asked, not scored). The
scores this file holds (docs/teaching.md quotes them; `python tests/test_grading_a2.py`
prints them, from the grader's runs):

    stacking every buffer          0       (at most TRIVIAL_MARK, 20)
    the hint's greedy typed in     <= 60   (LESSON_MARK)
    greedy-size, bestfit typed in  <= 60
    the reference                  100
"""

from __future__ import annotations

import pytest
from partial_answers import A2_HINT, stack  # noqa: E402

from minigraph.grading import check_planner
from minigraph.grading import planner_grader as pg
from minigraph.grading.cases import planner_cases
from minigraph.grading.reference import reference_function
from minigraph.memory.planners import PLANNERS

TRIVIAL_MARK = 20
LESSON_MARK = 60

needs_reference = pytest.mark.skipif(reference_function("a2") is None,
                                     reason="the reference solution is not here")


#: The notebook's hint, typed in: the largest first, each at the lowest offset where it
#: overlaps no placed buffer alive at a common step (the text the course tests hand in).
_HINT: dict = {}
exec(A2_HINT, _HINT)
hint = _HINT["my_planner"]


def library(name):
    def planner(buffers):
        return dict(PLANNERS[name](list(buffers)).offsets)
    planner.__name__ = name.replace("-", "_")
    return planner


def score(fn) -> float:
    return check_planner(fn, leaderboard=False, shrink=False).score


def test_the_scale_runs_through_its_three_marks() -> None:
    m = {"zero": 1000, "lesson": 500, "target": 400, "whose": "reference", "clear": True}
    assert pg.case_points(400, m) == pg.case_points(300, m) == 1.0
    assert pg.case_points(500, m) == pytest.approx(pg.LESSON_SHARE)
    assert pg.case_points(1000, m) == pg.case_points(1200, m) == 0.0
    assert pg.case_points(450, m) == pytest.approx(0.8)
    assert pg.case_points(750, m) == pytest.approx(0.3)
    shares = [pg.case_points(a, m) for a in range(300, 1100)]
    assert all(x >= y for x, y in zip(shares, shares[1:]))       # more bytes: less
    tie = {**m, "lesson": 400, "clear": False}                    # no 60% mark
    assert pg.case_points(700, tie) == pytest.approx(0.5)
    alive = {**m, "zero": 400, "target": 400}                     # nothing to reuse
    assert pg.case_points(400, alive) == 1.0 and pg.case_points(401, alive) == 0.0


@needs_reference
def test_graded_cases_have_a_reference_clearly_below_the_lessons() -> None:
    clear = [c for c in planner_cases() if pg.marks(c)["clear"]]
    assert len(clear) >= 3, [c.name for c in clear]
    for c in clear:
        m = pg.marks(c)
        assert m["target"] <= pg.CLEAR * m["lesson"] < m["zero"], (c.name, m)
        for name in pg.LESSON_PLANNERS:
            assert m["target"] < pg._library_arena(name, c), (c.name, name)


@needs_reference
def test_the_reference_scores_100() -> None:
    report = check_planner(reference_function("a2"), leaderboard=False)
    assert report.full_marks, report.summary()
    assert any("checks only" in n for n in report.notes)


@needs_reference
def test_the_shipped_targets_are_the_references(monkeypatch) -> None:
    # The students' repository has no reference: answers.json gives its arenas.
    want = {c.name: pg.marks(c) for c in planner_cases()}
    monkeypatch.setenv("MINIGRAPH_NO_REFERENCE", "1")
    assert {c.name: pg.marks(c) for c in planner_cases()} == want
    changed = planner_cases()[-1]
    changed.buffers = changed.buffers[:-1]                # a case changed since: no target
    assert pg.target(changed)[1] == "lessons"


def test_stacking_scores_at_most_20() -> None:
    report = check_planner(stack, leaderboard=False, shrink=False)
    assert report.n_passed == report.total, report.summary()      # valid everywhere
    assert report.score <= TRIVIAL_MARK, report.summary()


def test_the_hint_typed_in_scores_at_most_60() -> None:
    report = check_planner(hint, leaderboard=False, shrink=False)
    assert report.n_passed == report.total, report.summary()
    assert 0 < report.score <= LESSON_MARK, report.summary()


@pytest.mark.parametrize("name", pg.LESSON_PLANNERS)
def test_the_lessons_planners_typed_in_score_at_most_60(name) -> None:
    assert score(library(name)) <= LESSON_MARK


def test_a_failed_check_case_costs_points() -> None:
    # A case that is a check only (not scored) still counts, at 0, when the plan fails.
    def fails_on_empty(buffers):
        if not buffers:
            raise ValueError("no buffers")
        return hint(buffers)

    report = check_planner(fails_on_empty, leaderboard=False, shrink=False)
    assert report.first_failure.name == "edge/empty"
    assert report.score < score(hint)


def main() -> None:
    """Print the scores docs/teaching.md quotes."""
    rows = [("stacking every buffer", stack), ("the hint's greedy typed in", hint)]
    rows += [(f"{n} (library)", library(n)) for n in ("greedy-size", "bestfit", "refcount",
                                                       "ge")]
    ref = reference_function("a2")
    rows += [("the reference", ref)] if ref is not None else []
    graded = [c.name for c in planner_cases() if pg.marks(c)["clear"]]
    print(f"graded cases ({len(graded)}): {', '.join(graded)}")
    for label, fn in rows:
        print(f"{label:32} {score(fn):6.2f}")


if __name__ == "__main__":
    main()
