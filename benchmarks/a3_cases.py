"""Why A3 grades the budgets it grades: the survey behind `MODELS` in
minigraph/grading/heuristic_grader.py.

    python benchmarks/a3_cases.py              # each model at 80..30% of the total peak
    python benchmarks/a3_cases.py --scores     # what the grader (`check_heuristic`, real
                                               # runs) gives the reference, h_DTR typed in,
                                               # a constant and the library's heuristics

Simulated runs (the same decisions as the grader's real replay), with the grader's own
runtime and marks (`heuristic_grader.marks`): per case, the compute overhead of a constant
score (the scale's 0), the reference (the target, 100%), h_DTR and MegEngine's formula
(the lessons' formulas: the better is 60%), msps and dtr-live, and whether the reference is
clearly below the lessons' formulas (`CLEAR`): only such a case can pay the last 40 points
for beating what the lessons show. "thrash": past the thrash limit (x10). It reads
nothing of the reference but its compute (the survey of the reference's own choice lives
with it, withheld from students: `python lessons/assignments/solutions/a3.py`).
"""

from __future__ import annotations

import math
import sys

from minigraph.errors import BudgetError, ThrashError
from minigraph.grading import heuristic_grader as hg
from minigraph.grading.reference import reference_function
from minigraph.runtime.dtr.heuristics import HEURISTICS

GRID = (0.8, 0.7, 0.6, 0.5, 0.4, 0.35, 0.3)


def overhead(fn, case: hg.HeuristicCase) -> float | None:
    program = hg.case_program(case)
    budget, _ = hg.budget_for(program, case.ratio, case.ratio_of)
    rt = hg._guarded_runtime_class()(program, budget, fn, thrash_limit=hg.THRASH_LIMIT)
    try:
        return rt.run().overhead
    except (ThrashError, BudgetError):
        return None


def cell(v: float | None) -> str:
    return "thrash" if v is None else f"{v:.3f}"


def h_dtr(t, now):
    """h_DTR as lesson 07 shows it, typed in."""
    return math.inf if t.pinned else (t.cost + t.neighbour_cost) / (t.size * t.staleness)


def library(name: str):
    def score(t, now):
        return math.inf if t.pinned else HEURISTICS[name](t, now)
    score.__name__ = name
    return score


def scores() -> None:
    """The grader's score of each, and each case's points (%)."""
    from minigraph.grading import check_heuristic
    cands = [("reference", reference_function("a3")), ("h_DTR typed in", h_dtr),
             ("constant", hg.constant_score)] + \
        [(n, library(n)) for n in ("lru", "megengine", "msps", "dtr-live", "dtr-eqclass")]
    names = [c.name for c in hg.heuristic_cases()]
    print("| heuristic | score | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 2) + "|")
    for label, fn in cands:
        r = check_heuristic(fn, progress=False)
        print(f"| {label} | {r.score:.2f} | " +
              " | ".join(f"{100 * c.points:.1f}" for c in r.cases) + " |", flush=True)


def main(args: list[str]) -> int:
    if reference_function("a3") is None:
        sys.exit("the reference solution is not here: lessons/assignments/solutions/a3.py")
    if "--scores" in args:
        scores()
        return 0
    cases = hg.heuristic_cases(ratios=GRID)
    graded = {c.name for c in hg.heuristic_cases()}
    cols = ("constant", "target", "dtr", "megengine", "msps", "dtr-live")
    print("| case | " + " | ".join(cols) + " | clear | graded |")
    print("|---" * (len(cols) + 3) + "|")
    for c in cases:
        m = hg.marks(c)
        values = [m["zero"] if hg.baseline("constant", c) is not None else None,
                  m["target"]] + [hg.baseline(b, c) for b in cols[2:]]
        print(f"| {c.name} | " + " | ".join(cell(v) for v in values) +
              f" | {'yes' if m['clear'] else 'no'} | {'yes' if c.name in graded else ''} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
