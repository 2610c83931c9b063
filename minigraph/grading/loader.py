"""Loading a solution's function from a file: what both a notebook's checks and the
sandboxed child (`sandbox.submission.child_main`) need.

    my_planner = load_solution("my_planner", default=my_planner)   # MINIGRAPH_SOLUTION

`load_module` imports a `.py` file, or runs the graded code cells of an `.ipynb`
(`notebook_source`), IN THIS PROCESS: for trusted files (a notebook's `load_solution`,
tests), and inside the sandbox's child, which is where a student's file is loaded when
`sandbox.grade` grades it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from .reference import FUNCTIONS, reference_solution_path

SOLUTION_ENV = "MINIGRAPH_SOLUTION"


def notebook_source(path: Path) -> str:
    """The code cells of a notebook a grader should run: all but those tagged "check"
    (the cell that grades) or "skip-grading" and nbgrader's autograded test cells
    (grade: true, solution: false); IPython magics and shell lines dropped."""
    nb = json.loads(Path(path).read_text())
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
    PROCESS: for trusted files (a notebook's `load_solution`, tests); `sandbox.grade` runs
    a student's file in a child process instead."""
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
        key = next(k for k, (function, _) in FUNCTIONS.items() if function == name)
        where = str(reference_solution_path(key))
    return load_function(where, name)
