"""The instructors' key to the lesson exercises (course/lesson_key.py, left out of the
student release) is right, complete, and the only place an answer is written: every
answer passes its lesson's check, every exercise has one, and no public helper of a
lesson's checks hands a student an answer (the checks compute theirs privately)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEY_FILE = ROOT / "course" / "lesson_key.py"
if not KEY_FILE.exists():                    # a student's copy of the repository
    pytest.skip("course/lesson_key.py is not here (the student release)",
                allow_module_level=True)

sys.path.insert(0, str(KEY_FILE.parent))
lesson_key = importlib.import_module("lesson_key")

CASES = [(lesson, n) for lesson, ex in lesson_key.KEY.items() for n in ex]
NEEDS_TORCH = {"10", "10b"}


def _module(lesson: str):
    if lesson in NEEDS_TORCH:
        pytest.importorskip("torch")
    return importlib.import_module(f"minigraph.lessons.l{lesson}")


@pytest.fixture(autouse=True)
def _no_planner_left_behind():
    """Exercise 06.2 registers the student's planner, as the notebook does; take it away."""
    from minigraph.memory import PLANNERS
    before = set(PLANNERS)
    yield
    for name in set(PLANNERS) - before:
        del PLANNERS[name]


@pytest.mark.parametrize("lesson,number", CASES, ids=[f"{a}-{b}" for a, b in CASES])
def test_every_answer_of_the_key_passes_its_check(lesson, number) -> None:
    _module(lesson)
    ok, why = lesson_key.check(lesson, number)
    assert ok, f"{lesson}.{number}: {why}"


def _exercises(module) -> set[int]:
    return {int(name.split("_")[1]) for name, fn in vars(module).items()
            if name.startswith("exercise_") and name.split("_")[1].isdigit()
            and len(name.split("_")) == 2 and callable(fn)}


def test_every_lesson_exercise_has_an_answer_in_the_key() -> None:
    lessons = sorted(p.stem[1:] for p in (ROOT / "minigraph" / "lessons").glob("l*.py"))
    assert set(lessons) == set(lesson_key.KEY), "a lesson without a key, or a key without one"
    for lesson in lessons:
        if lesson in NEEDS_TORCH and importlib.util.find_spec("torch") is None:
            continue
        assert _exercises(_module(lesson)) == set(lesson_key.KEY[lesson]), lesson


@pytest.mark.parametrize("lesson", sorted(lesson_key.KEY))
def test_no_public_helper_of_a_lessons_checks_returns_an_answer(lesson) -> None:
    """A helper a student may call (public, no argument) returns inputs - graphs,
    buffers, arenas, cases - never the value an exercise asks for."""
    module = _module(lesson)
    values = [v for v, _ in lesson_key.KEY[lesson].values() if not callable(v)]
    for name, fn in vars(module).items():
        if name.startswith("_") or not inspect.isfunction(fn) or \
                fn.__module__ != module.__name__ or name.startswith("exercise_") and \
                name.split("_")[1].isdigit() and len(name.split("_")) == 2:
            continue
        if any(p.default is p.empty for p in inspect.signature(fn).parameters.values()):
            continue
        got = fn()
        for value in values:
            same = got == value
            assert not (same if isinstance(same, bool) else False), \
                f"l{lesson}.{name}() returns the answer {value!r}"
