"""Lesson 07bb's exercise check accepts the right answer and rejects wrong ones without
stating the answer."""

from __future__ import annotations

from minigraph.lessons import l07bb


def _right_1() -> str:
    """The one tensor whose eviction lets the output fit, found by trying each."""
    fits = []
    for k in l07bb.exercise_1_arena()[1]:
        arena, at = l07bb.exercise_1_arena()
        arena.free(at[k])
        if arena.can_fit(l07bb.REQUEST_1):
            fits.append(k)
    assert len(fits) == 1, f"exercise 1 must have one answer, not {fits}"
    return fits[0]


def test_exercise_1_one_eviction_makes_the_output_fit():
    right = _right_1()
    arena, at = l07bb.exercise_1_arena()
    assert arena.largest_free() < l07bb.REQUEST_1 and len(at) == 5
    assert l07bb.exercise_1(right)[0]
    for wrong in [k for k in at if k != right]:
        ok, why = l07bb.exercise_1(wrong)
        assert not ok and repr(right) not in why and f" {right} " not in why
    for unknown in ("q", "t", None, 3):        # freed or never there: the names are listed
        assert not l07bb.exercise_1(unknown)[0]
