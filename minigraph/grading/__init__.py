"""Automatic checks for the classroom assignments (minitorch style).

    from minigraph.grading import check_liveness, check_planner, check_heuristic
    check_liveness(my_liveness)      # A1: every tensor's [start, end] and bytes, the minimum
    check_planner(my_planner)        # A2: offsets for a list of Buffers
    check_heuristic(my_heuristic)    # A3: an eviction score for DTR

Each check runs the function on many cases, each in a child process with a time limit,
trusts nothing it returns (the validator, a re-execution in the arena, or the DTR
runtime decides), and returns a `GradeReport`: cases passed, a score out of 100, the first
failure shrunk to a small reproducer, and a comparison with the library's own versions.
From the shell: `python -m minigraph.grading a2 path/to/solution.py` or
`pytest tests/grading -m a2 --student path/to/solution.py` (docs/teaching.md).
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

from .heuristic import (  # noqa: F401
    CandidateView,
    HeuristicFault,
    check_heuristic,
    heuristic_cases,
    run_heuristic,
)
from .liveness import check_liveness  # noqa: F401
from .planner import check_planner  # noqa: F401
from .report import CaseResult, GradeReport  # noqa: F401

SOLUTION_ENV = "MINIGRAPH_SOLUTION"

#: assignment -> (check, name of the function the student writes, reference solution file)
ASSIGNMENTS: dict[str, tuple[Callable[..., GradeReport], str, str]] = {
    "a1": (check_liveness, "my_liveness", "a1.py"),
    "a2": (check_planner, "my_planner", "a2.py"),
    "a3": (check_heuristic, "my_heuristic", "a3.py"),
}


def reference_solution_path(assignment: str) -> Path:
    """lessons/assignments/solutions/<a1|a2|a3>.py of this repository."""
    root = Path(__file__).resolve().parents[2]
    return root / "lessons" / "assignments" / "solutions" / ASSIGNMENTS[assignment][2]


def _notebook_source(path: Path) -> str:
    """The code cells of a notebook a grader should run: all but those tagged "check"
    (the cell that grades) or "skip-grading"; IPython magics and shell lines dropped."""
    import json
    nb = json.loads(path.read_text())
    parts = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & {"check", "skip-grading"}:
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        parts.append("\n".join(ln for ln in src.splitlines()
                               if not ln.lstrip().startswith(("%", "!"))))
    return "\n\n".join(parts)


def load_module(path: str | os.PathLike) -> ModuleType:
    """Import a student's `.py` file, or run the code cells of their `.ipynb`, as a module."""
    path = Path(path).resolve()
    if not path.exists():
        raise FileNotFoundError(f"no such solution file: {path}")
    name = f"_student_{path.stem}_{abs(hash(str(path)))}"
    env_was = os.environ.pop(SOLUTION_ENV, None)   # a notebook must not load another file
    try:
        if path.suffix == ".ipynb":
            module = ModuleType(name)
            module.__file__ = str(path)
            sys.modules[name] = module
            code = compile(_notebook_source(path), str(path), "exec")
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


def grade(assignment: str, path: str | os.PathLike | None = None, **kw: Any) -> GradeReport:
    """Grade the student's file at `path` (default: the reference solution) for
    assignment "a1", "a2" or "a3"; keywords go to the check."""
    check, name, _ = ASSIGNMENTS[assignment.lower()]
    fn = load_function(path or reference_solution_path(assignment.lower()), name)
    return check(fn, **kw)
