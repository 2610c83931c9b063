"""What each kind of attempt scores on the three assignments: issue 50's table, measured.

    python course/attempts.py        # the table docs/teaching.md holds (a minute or two)

Rows, as an instructor would try them: an honest solution (the reference), what the lessons
or the notebook show typed in, a trivial answer, and using what the package ships (a
lookup of the shipped answers, a call of the library's own solver). The first three are
graded in-process by the assignment's check on every public and generated case (A3's
heuristics on simulated runs, which make the same choices as the grader's real replay:
`tests/test_grading_a3.py` checks that); the last goes through the grader's sandbox, as
students' files do (`python -m minigraph.grading aN FILE`), on a few cases. The attempts
themselves are the ones the tests hold to their caps (tests/test_grading_a1.py, _a2.py,
_a3.py, test_sandbox_imports.py), loaded from there so that the table and the tests grade
the same code.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from minigraph.grading import (  # noqa: E402
    check_liveness,
    check_planner,
    load_function,
    reference_solution_path,
)
from minigraph.grading.sandbox import grade  # noqa: E402


def _tests(name: str):
    """A test module of tests/ by file (it holds the attempts and their caps)."""
    spec = importlib.util.spec_from_file_location(f"_attempts_{name}",
                                                  ROOT / "tests" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(key: str, function: str):
    return load_function(reference_solution_path(key), function)


def a1_rows() -> dict[str, str]:
    t = _tests("test_grading_a1")
    t._REF = ref = _reference("a1", "my_liveness")

    def score(fn) -> str:
        return check_liveness(fn, shrink=False, progress=False).score_text
    return {"honest": score(ref),
            "shown": f"lesson 02's rules {score(t._lesson02)}; lessons 02 + 03 copied "
                     f"{score(t._library)}",
            "trivial": f"empty {score(t._empty)}; every tensor alive throughout "
                       f"{score(t._whole_run)}",
            "package": f"lookup of answers.json {_sandboxed('a1', t.LOOKUP)}; the "
                       f"library's liveness {_sandboxed('a1', LIBRARY['a1'])}"}


def a2_rows() -> dict[str, str]:
    t = _tests("test_grading_a2")
    ref = _reference("a2", "my_planner")

    def score(fn) -> str:
        return check_planner(fn, leaderboard=False, shrink=False, progress=False).score_text
    return {"honest": score(ref),
            "shown": f"the notebook's hint typed in {score(t.hint)}; its "
                     f"stack-everything plan {score(t.stack)}",
            "trivial": f"all at offset 0 {score(lambda bufs: {b.id: 0 for b in bufs})}",
            "package": f"a call of plan_buffers {_sandboxed('a2', LIBRARY['a2'])}"}


def a3_rows() -> dict[str, str]:
    t = _tests("test_grading_a3")
    ref = _reference("a3", "my_heuristic")

    def score(fn) -> str:
        return f"{t.simulated_score(fn):.2f}"
    return {"honest": score(ref),
            "shown": f"h_DTR (lesson 07) {score(t.h_dtr)}; MegEngine's (lesson 07b) "
                     f"{score(t.library('megengine'))}",
            "trivial": f"a constant {score(lambda tv, now: math.inf if tv.pinned else 1.0)}",
            "package": f"the library's h_DTR {_sandboxed('a3', LIBRARY['a3'])}"}


#: a call of the library's own solver, as a student's file would make it
LIBRARY = {
    "a1": "import minigraph as mg\n"
          "def my_liveness(graph, schedule, alignment=512, inplace=False):\n"
          "    lv = mg.liveness(graph, schedule, alignment)\n"
          "    return {n: [(iv.start, iv.end, iv.bytes)] for n, iv in lv.intervals.items()}, "
          "lv.theoretical_minimum()\n",
    "a2": "import minigraph as mg\ndef my_planner(buffers):\n"
          "    return mg.memory.plan_buffers(buffers, 'bestfit')[1].offsets\n",
    "a3": "import math, sys\ndef my_heuristic(t, now):\n"
          "    h = sys.modules['minigraph.runtime.dtr.heuristics'].dtr\n"
          "    return math.inf if t.pinned else h(t, now)\n",
}


def _few() -> dict:
    """A few cases of each assignment (test_sandbox_imports.py's): enough to tell 0 from
    full marks."""
    from minigraph.grading.cases import liveness_cases, planner_cases
    from minigraph.grading.heuristic_grader import heuristic_cases
    return {"a1": dict(cases=liveness_cases(generated=2)[-3:]),
            "a2": dict(cases=[c for c in planner_cases() if c.graph is not None][:2],
                       leaderboard=False, shrink=False),
            "a3": dict(cases=heuristic_cases(models=(), chain=True)[:1])}


def _sandboxed(key: str, source: str) -> str:
    """The grader's verdict on `source` as a student's file, on a few cases: its score,
    and the first words of its refusal where it refused."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "attempt.py"
        path.write_text(source)
        report = grade(key, path, **_few()[key])
    why = report.status.split(":")[1].strip() if report.status.startswith("not graded") \
        else ""
    return f"{report.score_text}" + (f" ({why})" if why else "")


ROWS = {"honest": "an honest solution (the reference)",
        "shown": "what the lessons or the notebook show, typed in",
        "trivial": "trivial",
        "package": "using what the package ships (through the grader's sandbox)"}


def table() -> str:
    """The markdown table, one row a kind of attempt, one column an assignment."""
    cols = {"A1": a1_rows(), "A2": a2_rows(), "A3": a3_rows()}
    lines = ["| attempt | A1 | A2 | A3 |", "|---|---|---|---|"]
    for key, label in ROWS.items():
        lines.append(f"| {label} | " + " | ".join(c[key] for c in cols.values()) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
