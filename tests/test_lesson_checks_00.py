"""Lesson 00's exercise checks (minigraph/lessons/l00.py): each accepts the right answer,
rejects a wrong one, and never puts the right answer in its hint."""

from __future__ import annotations

import re
from pathlib import Path

import minigraph as mg
from minigraph.lessons import l00
from minigraph.models import get_model

LESSON = Path(__file__).resolve().parent.parent / "lessons" / "src" / "00_tour.py"


def lesson_mlp() -> mg.Graph:
    """Section 1's cell of the lesson, run here: the graph the exercises talk about."""
    cells = LESSON.read_text().split("# %%")
    (cell,) = [c for c in cells if "step = mg.training_graph(" in c and "name_scope" in c]
    scope: dict = {"mg": mg}
    exec(cell.replace("print(step)", ""), scope)
    return scope["step"]


def signature(g: mg.Graph) -> list:
    return [(n.op, tuple(g.tensors[o].shape for o in n.outputs)) for n in g.nodes]


def test_the_checks_use_the_lessons_graph() -> None:
    assert signature(l00.mlp_step(64)) == signature(lesson_mlp())


def test_exercise_1_accepts_exactly_the_planners_at_the_minimum() -> None:
    step = get_model("unet").graph
    right = set()
    for p in mg.memory.PLANNERS:
        if p in ("ilp", "anneal", "search"):
            continue
        rep = mg.plan_memory(step, mg.MemoryOptions(inplace=False, planner=p))
        if rep.arena_bytes == rep.theoretical_minimum:
            right.add(p)
    assert right and right != set(mg.memory.PLANNERS) - {"ilp", "anneal", "search"}
    ok, why = l00.exercise_1(sorted(right))
    assert ok, why
    assert l00.exercise_1(set(right))[0]
    one_short = sorted(right)[1:]
    ok, why = l00.exercise_1(one_short)
    assert not ok
    missing = sorted(right - set(one_short))
    assert not any(m in why for m in missing), why       # the hint names no missing planner
    assert not l00.exercise_1(sorted(right) + ["refcount"])[0]
    for bad in ("refcount", None, 3, [["ge"]], ["ilp"], ["no-such-planner"]):
        assert not l00.exercise_1(bad)[0], bad


def test_exercise_2_accepts_the_growth_factor_and_rejects_others() -> None:
    def minimum(batch: int) -> int:
        return mg.plan_memory(l00.mlp_step(batch), mg.MemoryOptions(
            inplace=True, planner="refcount")).theoretical_minimum
    factor = minimum(128) / minimum(64)
    assert 1 < factor < 2
    ok, why = l00.exercise_2(factor)
    assert ok, why
    assert l00.exercise_2(round(factor, 2))[0]
    for bad in (2.0, 1.0, factor + 0.1, "x", None):
        ok, why = l00.exercise_2(bad)
        assert not ok, bad
        assert f"{factor:.2f}" not in why and f"{factor:.3f}" not in why, why
        assert not re.search(r"\d\.\d\d", why), why
