"""Automatic checks for the classroom assignments (minitorch style).

In a notebook (the function is the notebook's own, checked in this process):

    from minigraph.grading import check_liveness, check_planner, check_heuristic
    check_liveness(my_liveness)      # A1: every tensor's [start, end] and bytes, the minimum
    check_planner(my_planner)        # A2: offsets for a list of Buffers
    check_heuristic(my_heuristic)    # A3: an eviction score for DTR (prints each case)
    my_planner = load_solution("my_planner", default=my_planner)   # MINIGRAPH_SOLUTION

Grading a student's FILE (.py or .ipynb), which is never imported here:

    grade("a2", "sub.py", progress=True, private=None) -> GradeReport
    python -m minigraph.grading a2 sub.py [--json OUT] [--gradescope results.json]
                                         [--min-score S] [--private DIR] [--quiet]
    pytest tests/grading -m a2 --student sub.py

`grade` imports the file in a child process (`sandbox.Submission`: its own interpreter,
as isolated as the platform allows - another user, bubblewrap, hard limits: see
`isolation` - with time limits on loading, on each call and on the whole session) that
sends back only plain data; a file that exits, crashes, hangs or sends garbage scores 0
with the reason, and the command exits 1. Of an .ipynb every code cell runs but those
tagged "check" or "skip-grading" and nbgrader's autograded test cells (grade: true,
solution: false). Each check runs the function on many cases,
each in a forked process with a time limit, and trusts nothing it returns: the
validator, a re-execution in the arena, or a replay of the eviction choices in DTR's
runtime decides. A `GradeReport` holds the cases passed, a score out of 100, the first
failure shrunk to a reproducer, a comparison with the library's own versions;
`to_json()` and `to_gradescope()` (Gradescope's results.json) write it out.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import GradingError
from . import isolation
from .cases import PRIVATE_ENV
from .heuristic_grader import (  # noqa: F401
    CandidateView,
    HeuristicFault,
    check_heuristic,
    heuristic_cases,
    run_heuristic,
)
from .liveness_grader import check_liveness  # noqa: F401
from .planner_grader import check_planner, library_planners  # noqa: F401
from .reference import reference_function, reference_solution_path  # noqa: F401
from .report import CaseResult, GradeReport  # noqa: F401
from .sandbox import Submission

SOLUTION_ENV = "MINIGRAPH_SOLUTION"

#: assignment -> (check, name of the function the student writes, reference solution file)
ASSIGNMENTS: dict[str, tuple[Callable[..., GradeReport], str, str]] = {
    "a1": (check_liveness, "my_liveness", "a1.py"),
    "a2": (check_planner, "my_planner", "a2.py"),
    "a3": (check_heuristic, "my_heuristic", "a3.py"),
}


def notebook_source(path: Path) -> str:
    """The code cells of a notebook a grader should run: all but those tagged "check"
    (the cell that grades) or "skip-grading" and nbgrader's autograded test cells
    (grade: true, solution: false); IPython magics and shell lines dropped."""
    import json
    nb = json.loads(path.read_text())
    parts = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        nbg = cell.get("metadata", {}).get("nbgrader", {})
        if tags & {"check", "skip-grading"} or (nbg.get("grade") and not nbg.get("solution")):
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        parts.append("\n".join(ln for ln in src.splitlines()
                               if not ln.lstrip().startswith(("%", "!"))))
    return "\n\n".join(parts)


def load_module(path: str | os.PathLike) -> ModuleType:
    """Import a `.py` file, or run the code cells of an `.ipynb`, as a module IN THIS
    PROCESS: for trusted files (a notebook's `load_solution`, tests); `grade` runs a
    student's file in a child process instead."""
    path = Path(path).resolve()
    if not path.exists():
        raise FileNotFoundError(f"no such solution file: {path}")
    name = f"_student_{path.stem}_{abs(hash(str(path)))}"
    env_was = os.environ.pop(SOLUTION_ENV, None)   # a notebook must not load another file
    try:
        if path.suffix == ".ipynb":
            module = ModuleType(name)
            module.__file__ = str(path)
            module.__dict__["display"] = lambda *a, **k: None   # IPython's, outside IPython
            sys.modules[name] = module
            code = compile(notebook_source(path), str(path), "exec")
            with contextlib.redirect_stdout(io.StringIO()):   # the demo cells' prints
                exec(code, module.__dict__)   # noqa: S102  grading runs the student's code
            return module
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        if env_was is not None:
            os.environ[SOLUTION_ENV] = env_was


def load_function(path: str | os.PathLike, name: str) -> Callable:
    """The function `name` from a student's file (`.py` or `.ipynb`)."""
    module = load_module(path)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise AttributeError(f"{path} defines no function {name}()")
    return fn


def load_solution(name: str, default: Callable | None = None) -> Callable | None:
    """`default`, unless the environment variable MINIGRAPH_SOLUTION names a file: then the
    function `name` from that file ("reference" means the repository's reference solution
    of whichever assignment defines `name`). The assignment notebooks call this right after
    the stub, so a grader can run them with a solution filled in."""
    where = os.environ.get(SOLUTION_ENV)
    if not where:
        return default
    if where == "reference":
        key = next(k for k, v in ASSIGNMENTS.items() if v[1] == name)
        where = str(reference_solution_path(key))
    return load_function(where, name)


def _preload() -> None:
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
    root = Path(__file__).resolve().parents[2]
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
    _preload()
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
