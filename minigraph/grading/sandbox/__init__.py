"""The sandbox wing: grading a student's FILE (.py or .ipynb), which is never imported in
the grader's process. The checks (`minigraph.grading`) never import this wing; it uses
them.

    grade("a2", "sub.py", progress=True, private=None) -> GradeReport
    python -m minigraph.grading a2 sub.py [--json OUT] [--gradescope results.json]
                                         [--min-score S] [--private DIR] [--quiet]
    pytest tests/grading -m a2 --student sub.py          # the plugin: `pytest_plugin`

`grade` imports the file in a child process (`submission.Submission`: its own
interpreter, as isolated as the platform allows - another user, bubblewrap, hard limits:
see `isolation` - with time limits on loading, on each call and on the whole session)
that sends back only plain data; a file that changes minigraph itself (`tamper`), uses
minigraph's own answer to its assignment (`imports`: an allowlist of imports, the
library's solvers refused), exits, crashes, hangs or sends garbage scores 0 with the
reason, and the command
(`command`) exits 1. Of an .ipynb every code cell runs but those tagged "check" or
"skip-grading" and nbgrader's autograded test cells (`loader.notebook_source`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import GradingError
from ..cases import PRIVATE_ENV
from ..heuristic_grader import check_heuristic
from ..liveness_grader import check_liveness
from ..planner_grader import check_planner, library_planners
from ..reference import FUNCTIONS, reference_function, reference_solution_path
from ..report import GradeReport
from . import isolation
from .submission import Submission

#: assignment -> (check, name of the function the student writes, reference solution file)
ASSIGNMENTS: dict[str, tuple[Callable[..., GradeReport], str, str]] = {
    key: (check, *FUNCTIONS[key]) for key, check in
    (("a1", check_liveness), ("a2", check_planner), ("a3", check_heuristic))}


def preload() -> None:
    """Import now every module the checks would import later, so that the grader imports
    nothing once a submission runs: where the submission runs as the grader's own user,
    it could rewrite a file this process has yet to read. (The graders import the library
    at their top; the cases, private ones included, are read before the submission
    starts, too.) Left to load: the registry's planners and what they import inside their
    functions (SciPy's MILP for the ILP planners), and the reference solutions (A1's
    expected answers, A3's targets); tests/test_grader_isolation.py checks that nothing
    else is."""
    import html  # noqa: F401  GradeReport._repr_html_
    import tempfile  # noqa: F401

    import scipy.optimize  # noqa: F401  the ILP planners' milp
    import scipy.sparse  # noqa: F401
    library_planners()
    for key in ASSIGNMENTS:   # the reference solutions, where they are: A1's and A3's oracles
        reference_function(key)
    isolation.jail()   # and the sandbox is chosen (tried once, in children of its own)


def secret_paths(private: Any = None) -> list[Path]:
    """What a submission must never read: the reference solutions, the private cases (the
    argument or MINIGRAPH_PRIVATE_CASES), and in a source checkout the course folder
    (nbgrader's sources hold the solutions, its hand-ins other students' work) and the git
    history."""
    root = isolation.PACKAGE.parent
    paths = [reference_solution_path("a1").parent]
    where = private if isinstance(private, (str, os.PathLike)) else \
        os.environ.get(PRIVATE_ENV) if private is None else None
    if where:
        paths.append(Path(where).resolve())
    if (root / "lessons").is_dir():
        paths += [p for p in (root / "course", root / ".git") if p.exists()]
    return paths


def grade(assignment: str, path: str | os.PathLike | None = None, *,
          progress: bool = False, **kw: Any) -> GradeReport:
    """Grade the file at `path` (default: the reference solution) for assignment "a1",
    "a2" or "a3", the file imported and run only in a child process (`Submission`);
    `progress` prints each case as it is judged; other keywords go to the check. A file
    that cannot be loaded, or whose process exits, hangs or sends garbage, fails every
    case it did not answer, and the report's status says why. The report is returned
    once every process of the file is gone; `isolation` says when it ran only partly
    isolated (see `isolation.jail`)."""
    key = assignment.lower()
    if key not in ASSIGNMENTS:
        raise GradingError(f"assignment {assignment!r}: expected one of "
                           f"{', '.join(sorted(ASSIGNMENTS))}")
    check, name, _ = ASSIGNMENTS[key]
    preload()
    with Submission(path or reference_solution_path(key), name,
                    hide=secret_paths(kw.get("private"))) as sub:
        if progress:
            print(f"grading {sub.path} ({key}: {name}), in a child process; each case as "
                  "it is judged:", flush=True)
        report = check(sub, progress=progress, **kw)   # the child starts at the first call
    if sub.problem:
        report.status = f"not graded: {sub.problem.splitlines()[0]}"
        if "\n" in sub.problem:
            report.notes.append(sub.problem)
    report.isolation = sub.isolation
    return report
