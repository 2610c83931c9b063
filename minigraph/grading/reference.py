"""The instructor's reference solutions: where they are, and loading one to grade with.

A1's expected answers, A2's target arenas and A3's target overheads come from the
reference solutions of `lessons/assignments/solutions/`, which the students' repository
does not have (`course/student_repo.py`). Where they are (the instructor's checkout,
nbgrader's course, Gradescope's autograder) the grader runs them, in its own process
(they are trusted), on every case, private ones included. Where they are not, the grader
uses what they gave on the public cases, shipped with the package (`answers.json`,
written by `answers`); the private cases are graded where the instructor is. A1's answers
ship only as a digest (`answer_digest`; in part B also one of the copies alone,
`copies_digest`), never readable: a submission that looks them up finds nothing to copy.
A2's ship as numbers (each case's digest and the target's arena), A3's too (each case's
budget and the target's overhead): a target is no answer.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .cases import graph_to_json

#: assignment -> (name of the function the student writes, reference solution file)
FUNCTIONS = {"a1": ("my_liveness", "a1.py"), "a2": ("my_planner", "a2.py"),
             "a3": ("my_heuristic", "a3.py")}
#: set to anything but "" to grade as the students' repository does (no reference)
NO_REFERENCE_ENV = "MINIGRAPH_NO_REFERENCE"


def reference_solution_path(assignment: str) -> Path:
    """lessons/assignments/solutions/<a1|a2|a3>.py of this repository."""
    root = Path(__file__).resolve().parents[2]
    return root / "lessons" / "assignments" / "solutions" / FUNCTIONS[assignment][1]


def reference_function(assignment: str) -> Callable | None:
    """The reference solution's function, loaded once in this process; None where the
    file is not here (the students' repository) or `MINIGRAPH_NO_REFERENCE` is set."""
    if os.environ.get(NO_REFERENCE_ENV):
        return None
    return _load(assignment)


@functools.cache
def _load(assignment: str) -> Callable | None:
    path = reference_solution_path(assignment)
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"_minigraph_reference_{assignment}", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, FUNCTIONS[assignment][0])


# ---------------------------------------------------------------------------------------
# What the reference solutions answered on the public cases (written by `answers`)
# ---------------------------------------------------------------------------------------

ANSWERS = Path(__file__).with_name("answers.json")


@functools.cache
def shipped() -> dict:
    """answers.json: {"a1": {case name: {"key", "digest"} (part B: and "copies")}, "a2":
    {case name: [digest, arena]}, "a3": {case name: [budget, overhead]}}; empty where it
    is missing."""
    if not ANSWERS.is_file():
        return {}
    return json.loads(ANSWERS.read_text(encoding="utf-8"))


def fingerprint(graph: Any, schedule: Sequence[str], alignment: int,
                inplace: bool = False) -> str:
    """A digest of an A1 case - the graph, the schedule, the alignment, and for part B
    that it asks for the hand-overs - so that a case changed since its answer was
    shipped is never judged by that answer."""
    case = [graph_to_json(graph), list(schedule), alignment] + (["inplace"] if inplace else [])
    text = json.dumps(case, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def answer_digest(key: str, intervals: dict[str, Sequence[Sequence[int]]], minimum: int,
                  handovers: Sequence | None = None) -> str:
    """A digest of an A1 answer - every tensor's copies, the minimum, and in part B the
    hand-overs ((input, copy), (output, copy)) in any order - for the case of fingerprint
    `key`: two answers have the same digest exactly when they are equal, and the digest
    does not give the answer back (the copies of a whole case are far too many to try)."""
    answer = [key, sorted((str(n), [[int(x) for x in c] for c in copies])
                          for n, copies in intervals.items()), int(minimum)]
    if handovers is not None:
        answer.append(sorted([[str(x), int(i)], [str(y), int(j)]]
                             for (x, i), (y, j) in handovers))
    return hashlib.blake2b(json.dumps(answer).encode(), digest_size=16).hexdigest()


def copies_digest(key: str, intervals: dict[str, Sequence[Sequence[int]]]) -> str:
    """A digest of the copies alone (part B ships it beside the whole answer's, so that
    the students' repository can tell right copies from right hand-overs)."""
    return answer_digest(f"{key}/copies", intervals, 0)
