"""Automatic checks for the classroom assignments (minitorch style).

In a notebook (the function is the notebook's own, checked in this process):

    from minigraph.grading import check_liveness, check_planner, check_heuristic
    check_liveness(my_liveness)      # A1: every copy's [start, end, bytes], hand-overs, minimum
    check_planner(my_planner)        # A2: offsets for a list of Buffers
    check_heuristic(my_heuristic)    # A3: an eviction score for DTR (prints each case)
    my_planner = load_solution("my_planner", default=my_planner)   # MINIGRAPH_SOLUTION (`loader`)

Each check runs the function on many cases, each in a forked process with a time limit
(`runner`), and trusts nothing it returns: the validator, a re-execution in the arena,
or a replay of the eviction choices in DTR's runtime decides. A `GradeReport` holds the
cases passed, a score out of 100, the first failure shrunk to a reproducer, a comparison
with the library's own versions; `to_json()` and `to_gradescope()` (Gradescope's
results.json) write it out.

Grading a student's FILE (.py or .ipynb), which is never imported in the grader's
process, is the sandbox wing's (`minigraph.grading.sandbox`), which this package never
imports: `from minigraph.grading.sandbox import grade`, `python -m minigraph.grading a2
sub.py ...`, `pytest tests/grading -m a2 --student sub.py`.
"""

from __future__ import annotations

from .heuristic_grader import (  # noqa: F401
    CandidateView,
    HeuristicFault,
    check_heuristic,
    heuristic_cases,
    run_heuristic,
)
from .liveness_grader import check_liveness  # noqa: F401
from .loader import (  # noqa: F401
    SOLUTION_ENV,
    load_function,
    load_module,
    load_solution,
    notebook_source,
)
from .planner_grader import check_planner, library_planners  # noqa: F401
from .reference import reference_function, reference_solution_path  # noqa: F401
from .report import CaseResult, GradeReport  # noqa: F401
