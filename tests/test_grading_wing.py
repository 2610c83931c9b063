"""The checks and the sandbox wing: a student's `from minigraph.grading import
check_liveness` loads the checks only, never the file grader's sandbox (bubblewrap,
users, /proc, the child process), and no module of the grading package imports another
that imports it back, not even inside a function."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GRADING = ROOT / "minigraph" / "grading"
WING = "minigraph.grading.sandbox"

# In a fresh interpreter: the package first (what its front door loads is its own
# business), then `ctypes` and `subprocess` made unimportable, then the student's import.
# A grading module that imports either (at its top, or through what it imports) fails.
STUDENT_IMPORT = """
import json, sys
import minigraph
before = set(sys.modules)
saved = {name: sys.modules.get(name) for name in ("ctypes", "subprocess")}
for name in saved:
    sys.modules[name] = None      # `import ctypes` now raises ImportError
from minigraph.grading import (HeuristicFault, check_heuristic, check_liveness,
                               check_planner, load_solution, run_heuristic)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _every_import(path: Path) -> set[str]:
    """The minigraph modules `path` imports anywhere in it (inside functions too),
    relative imports made absolute; `from pkg import name` counts as `pkg.name` where
    that is a module, else as `pkg`."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    modules = {_module_name(p) for p in GRADING.rglob("*.py")}
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".") if node.level else []
            if node.level > 1:
                base = base[:len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                out.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod)
    return {m for m in out if m.startswith("minigraph")}


def test_the_students_import_loads_no_module_of_the_wing_nor_ctypes_nor_subprocess() -> None:
    r = subprocess.run([sys.executable, "-c", STUDENT_IMPORT], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    loaded = json.loads(r.stdout.splitlines()[-1])
    assert "minigraph.grading.liveness_grader" in loaded, loaded   # the test sees the import
    assert not [m for m in loaded if m == WING or m.startswith(WING + ".")], loaded
    assert "ctypes" not in loaded and "subprocess" not in loaded, loaded


def test_no_grading_module_imports_one_that_imports_it_back() -> None:
    # Every import counts, those inside functions included, and a package's `__init__`
    # importing its submodules too: a submodule that imports its package back (as
    # sandbox.py imported grading/__init__ inside two functions) closes a circle.
    edges = {}
    for p in GRADING.rglob("*.py"):
        m = _module_name(p)
        edges[m] = {d for d in _every_import(p) if d.startswith("minigraph.grading")
                    and d != m}
    circles = []

    def reach(start: str, m: str, seen: set[str]) -> None:
        for d in edges.get(m, ()):
            if d == start:
                circles.append((start, m))
            elif d not in seen:
                seen.add(d)
                reach(start, d, seen)

    for m in edges:
        reach(m, m, {m})
    assert not circles, circles


def test_the_contract_forbids_every_check_module_to_import_the_wing() -> None:
    tomllib = pytest.importorskip("tomllib")      # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if set(c.get("forbidden_modules", ())) == {WING, WING + ".*"})
    assert contract["type"] == "forbidden" and contract["as_packages"] is False
    checks = {_module_name(p) for p in GRADING.glob("*.py") if p.name != "__main__.py"}
    assert set(contract["source_modules"]) == checks   # a new check module is listed too
