"""Lesson 09's exercise checks accept the right answer and reject wrong ones without
stating the answer (issue 17, point 4)."""

from __future__ import annotations

import ast
from pathlib import Path

from minigraph.lessons import l09
from minigraph.memory.online import CachingAllocator, MiB, replay_allocator

LESSON = Path(__file__).resolve().parents[1] / "lessons" / "src" / "09_online_allocators.py"


def test_exercise_1_best_fit_below_first_fit():
    # Holes of 1 and 2 units; best fit puts the 1-unit request in the 1-unit hole and
    # keeps the 2-unit hole for the 2-unit request; first fit splits the 2-unit hole.
    good = [("alloc", "a", 2 * MiB), ("alloc", "x", MiB), ("alloc", "b", MiB),
            ("alloc", "y", MiB), ("free", "a"), ("free", "b"), ("alloc", "c", MiB),
            ("alloc", "d", 2 * MiB)]
    assert replay_allocator(good, "best-fit").peak_reserved < \
        replay_allocator(good, "first-fit").peak_reserved
    assert l09.exercise_1(good)[0]
    tie = [("alloc", "a", MiB), ("free", "a"), ("alloc", "b", MiB)]
    for wrong in (tie, good + [("free", "c")], [("free", "zz")], "trace", None):
        assert not l09.exercise_1(wrong)[0]


def test_exercise_2_fragmented_request_only():
    a = CachingAllocator()
    a.replay(l09.PREFIX)
    free = a.free_bytes()
    assert free == 10 * MiB and a.largest_free() < free
    fragmented = a.largest_free() + 512       # above the largest free block, within the free bytes
    ok, why = l09.exercise_2(fragmented)
    assert ok and "fragmentation" in why
    ok, why = l09.exercise_2(1)              # a small request: a small segment of its own
    assert ok and "small" in why
    for wrong in (2 * MiB, a.largest_free(), free + MiB, 0, -5, "9 MiB", None):
        ok, why = l09.exercise_2(wrong)
        assert not ok
        assert f"{a.largest_free() / MiB:g} MiB" not in why and str(a.largest_free()) not in why


def test_exercise_3_caching_bytes_for_the_hole_trace():
    truth = replay_allocator(l09.HOLE, "caching").peak_reserved
    assert l09.exercise_3(truth)[0]
    for wrong in (12 * MiB, truth // MiB, truth + 512, str(truth), None):
        ok, why = l09.exercise_3(wrong)
        assert not ok and str(truth) not in why and f"{truth // MiB} MiB" not in why


def test_the_lesson_writes_out_the_same_hole_trace():
    tree = ast.parse(LESSON.read_text(encoding="utf-8"))
    hole = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "HOLE" for t in node.targets))
    assert eval(compile(ast.Expression(hole), "HOLE", "eval"), {"MiB": MiB}) == l09.HOLE
