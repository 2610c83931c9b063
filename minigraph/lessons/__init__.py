"""Helpers the lesson notebooks share. `check_answers` prints how the exercises fare; the
checks themselves live in `lNN.py` (NN the lesson), out of the notebook, so that no cell
shows the expected answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: A check takes the student's (non-None) answer and returns (right?, explanation).
Check = Callable[[Any], "tuple[bool, str]"]


def check_answers(answers: Mapping[int, tuple[Any, Check]]) -> None:
    """Print how the exercises fare: "not done yet" while every answer is None, else one
    line per exercise, "N: not done yet", "N: right: <why>" or "N: not quite: <why>".

    `answers` maps an exercise number to (the student's answer, its check). A check runs
    only for an answer given: it may be slow, or grade the answer itself (a graph, a list
    of buffers), so it gets the answer rather than being compared to a fixed value.
    """
    if all(given is None for given, _ in answers.values()):
        print("not done yet")
        return
    for number, (given, check) in answers.items():
        if given is None:
            print(f"{number}: not done yet")
            continue
        ok, why = check(given)
        print(f"{number}: {'right' if ok else 'not quite'}: {why}")


def try_student(fn: Callable[..., Any], name: str, case: str, *args: Any) -> tuple[bool, Any]:
    """Run the student's function `name` (`fn`) on `case`: (True, what `fn(*args)`
    returned), or (False, the message: the stub still raises NotImplementedError, or what
    it raised on which case), for the exercise checks of lessons 02-05."""
    try:
        return True, fn(*args)
    except NotImplementedError:
        return False, f"{name} still raises NotImplementedError: write its body"
    except Exception as e:      # the student's code: say what it raised, and where
        return False, f"on {case}: it raised {type(e).__name__}: {e}"
