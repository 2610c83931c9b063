"""Lesson 08's exercise checks (minigraph/lessons/l08.py): each accepts the right answer,
rejects a wrong one, and never puts the right answer in its hint."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import minigraph as mg
from minigraph.lessons import l08
from minigraph.memory.liveness import liveness
from minigraph.memory.planners import plan_buffers
from minigraph.models import get_model

LESSON = Path(__file__).resolve().parent.parent / "lessons" / "src" / "08_gpu_cupy.py"


def test_the_lesson_plans_the_graphs_the_checks_use() -> None:
    text = LESSON.read_text()
    assert 'get_model("cnn", batch=8)' in text and "mixed = l08.mixed_graph()" in text


def aligned_everywhere(alignment: int) -> bool:
    # refcount on the buffers alone (no dtype): plan_memory itself keeps every offset
    # aligned for the dtype at any alignment
    g = l08.mixed_graph()
    _, placed = plan_buffers(liveness(g, alignment=alignment).buffers(), "refcount", alignment)
    assert not l08.misaligned(mg.plan_memory(g, planner="refcount", alignment=alignment), g)
    return all(off % np.dtype(g.tensor(n).dtype).itemsize == 0
               for n, off in placed.offsets.items())


def test_exercise_1_accepts_the_smallest_safe_alignment_only() -> None:
    right = min(al for al in l08.ALIGNMENTS if aligned_everywhere(al))
    assert right > 1                      # alignment 1 does misalign: the exercise has a point
    ok, why = l08.exercise_1(right)
    assert ok, why
    for bad in [al for al in l08.ALIGNMENTS if al != right] + [3, None, "8"]:
        ok, why = l08.exercise_1(bad)
        assert not ok, bad
        hint = why.replace(str(l08.ALIGNMENTS), "")       # the choices may be listed
        assert f" {right} " not in f" {hint} ".replace(",", " "), why


def test_exercise_2_accepts_the_difference_in_bytes() -> None:
    step = get_model("cnn", batch=8).graph

    def arena(al: int) -> int:
        return mg.plan_memory(step, mg.MemoryOptions(inplace=True, planner="bestfit",
                                                     alignment=al)).arena_bytes
    right = arena(512) - arena(8)
    assert right > 0
    ok, why = l08.exercise_2(right)
    assert ok, why
    assert l08.exercise_2(np.int64(right))[0]
    for bad in (right - 1, right + 512, 0, -right, float(right) + 0.5, "1608", True, None):
        ok, why = l08.exercise_2(bad)
        assert not ok, bad
        assert str(right) not in why, why
