"""Issue 50, point 2: a submission may not use minigraph's own answer to its assignment
(A1's liveness, A2's planners, A3's eviction heuristics). The sandbox's child refuses the
import (`ForbiddenImport`) or, for every other way to reach the function (an allowed
module's attribute, `sys.modules`, `gc`), its call (`ForbiddenCall`); either makes the
file "not graded", score 0, with the one-line reason. An honest file, and each
assignment's notebook with the reference solution in it, still gets full marks.
"""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from minigraph.grading import reference_solution_path
from minigraph.grading.cases import liveness_cases, planner_cases
from minigraph.grading.heuristic_grader import heuristic_cases
from minigraph.grading.sandbox import grade
from minigraph.grading.sandbox.imports import ALLOWED, check_import

ROOT = Path(__file__).resolve().parents[1]
ASSIGN = ROOT / "lessons" / "assignments"
NOTEBOOKS = {"a1": "A1_liveness.ipynb", "a2": "A2_planner.ipynb", "a3": "A3_eviction.ipynb"}


@pytest.fixture(scope="module")
def few():
    """A few cases of each assignment: enough to tell 0 from full marks."""
    return {"a1": dict(cases=liveness_cases(generated=2)[-3:]),
            "a2": dict(cases=[c for c in planner_cases() if c.graph is not None][:2],
                       leaderboard=False, shrink=False),
            "a3": dict(cases=heuristic_cases(models=(), chain=True)[:1])}


A2_PLANNER = """
def my_planner(buffers):
    return PLANNERS["bestfit"](buffers).offsets
"""
A1_LIVENESS = """
def my_liveness(graph, schedule, alignment=512):
    lv = L(graph, schedule, alignment=alignment)
    return {}, lv.theoretical_minimum()
"""
A3_HEURISTIC = """
def my_heuristic(t, now):
    return H(t, now)
"""

ROUTES = [   # (assignment, the file, what the report's reason names)
    ("a2", "from minigraph.memory.planners import PLANNERS\n" + A2_PLANNER,
     "ForbiddenImport: your file imports minigraph.memory.planners.PLANNERS"),
    ("a2", "import minigraph.memory.planners\nPLANNERS = minigraph.memory.PLANNERS\n"
           + A2_PLANNER, "ForbiddenImport: your file imports minigraph.memory.planners"),
    ("a2", "import importlib\nPLANNERS = importlib.import_module("
           "'minigraph.memory.planners').PLANNERS\n" + A2_PLANNER,
     "ForbiddenImport: your file imports minigraph.memory.planners"),
    ("a2", "PLANNERS = __import__('minigraph.memory', fromlist=['PLANNERS']).PLANNERS\n"
           + A2_PLANNER, "ForbiddenImport: your file imports minigraph.memory.PLANNERS"),
    ("a2", "exec('from minigraph.memory.planners import PLANNERS')\n" + A2_PLANNER,
     "ForbiddenImport: your file imports minigraph.memory.planners.PLANNERS"),
    ("a2", "class S(str):\n    def __contains__(self, x):\n        return False\n"
           "PLANNERS = __import__(S('minigraph.memory.planners'), fromlist=['PLANNERS'])"
           ".PLANNERS\n" + A2_PLANNER,   # a name that hides what it holds from a check
     "ForbiddenImport: your file imports minigraph.memory.planners.PLANNERS"),
    ("a2", "PLANNERS = __import__('planners', {'__package__': 'minigraph.memory'}, None, "
           "['PLANNERS'], 1).PLANNERS\n" + A2_PLANNER,   # relative, from forged globals
     "ForbiddenImport: your file makes a relative import (.planners)"),
    ("a2", "try:\n    from minigraph.memory import plan_buffers\nexcept ImportError:\n"
           "    pass\ndef my_planner(buffers):\n    off, top = {}, 0\n    for b in buffers:\n"
           "        off[b.id] = top\n        top += b.size\n    return off\n",
     "ForbiddenImport: your file imports minigraph.memory.plan_buffers"),   # caught: still
    ("a2", "import minigraph as mg\ndef my_planner(buffers):\n"
           "    return mg.memory.plan_buffers(buffers, 'bestfit')[1].offsets\n",
     "ForbiddenCall: your file ran minigraph.memory.planners.plan_buffers"),
    ("a2", "import sys\nPLANNERS = sys.modules['minigraph.memory.planners'].PLANNERS\n"
           + A2_PLANNER, "ForbiddenCall: your file ran minigraph.memory.planners."),
    ("a2", "from minigraph.grading import check_planner\n"   # a walk from an allowed name
           "PLANNERS = check_planner.__wrapped__.__globals__['PLANNERS']\n" + A2_PLANNER,
     "ForbiddenCall: your file ran minigraph.memory.planners."),
    ("a1", "from minigraph.memory import liveness as L\n" + A1_LIVENESS,
     "ForbiddenImport: your file imports minigraph.memory.liveness"),
    ("a1", "import minigraph\nL = minigraph.liveness\n" + A1_LIVENESS,
     "ForbiddenCall: your file ran minigraph.memory.liveness.liveness"),
    ("a1", "from minigraph.memory.inplace import declared_pairs\n" + A1_LIVENESS,
     "ForbiddenImport: your file imports minigraph.memory.inplace.declared_pairs"),
    ("a1", "import sys\ndef my_liveness(graph, schedule, alignment=512, inplace=False):\n"
           "    sys.modules['minigraph.memory.inplace'].declared_pairs(graph, graph.nodes[0])"
           "\n    return {}, 0\n",   # part B's legality rule, the library's
     "ForbiddenCall: your file ran minigraph.memory.inplace.declared_pairs"),
    ("a3", "from minigraph.runtime.dtr.heuristics import dtr as H\n" + A3_HEURISTIC,
     "ForbiddenImport: your file imports minigraph.runtime.dtr.heuristics.dtr"),
    ("a3", "import sys\nH = sys.modules['minigraph.runtime.dtr.heuristics'].dtr\n"
           + A3_HEURISTIC, "ForbiddenCall: your file ran minigraph.runtime.dtr.heuristics.dtr"),
    ("a3", "import gc\nmy_heuristic = next(f for f in gc.get_objects() if getattr(f, "
           "'__qualname__', '') == 'megengine' and getattr(f, '__module__', '') == "
           "'minigraph.runtime.dtr.heuristics')\n",   # the library's function itself
     "ForbiddenCall: your file ran minigraph.runtime.dtr.heuristics.megengine"),
]


@pytest.mark.parametrize("assignment, code, reason", ROUTES,
                         ids=[f"{a}-{k}" for k, (a, _, _) in enumerate(ROUTES)])
def test_the_librarys_answer_is_refused_by_every_route(assignment, code, reason, few,
                                                       tmp_path) -> None:
    path = tmp_path / "sub.py"
    path.write_text(code)
    report = grade(assignment, path, **few[assignment])
    assert report.score == 0 and not report.full_marks, report.summary()
    assert report.status.startswith(f"not graded: {reason}"), report.status
    assert "\n" not in report.status
    assert "may import from minigraph only" in report.status   # and says what is allowed


def test_an_honest_file_with_numpy_math_and_the_notebooks_imports_gets_full_marks(
        few, tmp_path) -> None:
    imports = {
        "a1": "import math\nimport numpy as np\nimport minigraph as mg\n"
              "from minigraph.errors import GraphError\n"
              "from minigraph.grading import check_liveness, load_solution\n"
              "from minigraph.grading.cases import small_mlp_graph\n"
              "from minigraph.ops.registry import get_op\n",
        "a2": "import math\nimport numpy as np\nimport minigraph as mg\n"
              "from minigraph.errors import PlanError\n"
              "from minigraph.grading import check_planner, load_solution\n"
              "from minigraph.memory import Buffer, theoretical_minimum, validate_offsets\n",
        "a3": "import math\nimport numpy as np\nfrom minigraph.examples import linear_chain\n"
              "from minigraph.grading import check_heuristic, run_heuristic\n"
              "from minigraph.runtime.dtr import simulate\n",
    }
    for key, head in imports.items():
        path = tmp_path / f"{key}.py"
        path.write_text(head + reference_solution_path(key).read_text())
        report = grade(key, path, **few[key])
        assert report.full_marks, report.summary()
    assert builtins.__import__.__module__ == "builtins"   # the grader's process untouched


@pytest.mark.parametrize("key", sorted(NOTEBOOKS))
def test_each_notebook_with_the_reference_solution_gets_full_marks(key, few,
                                                                   tmp_path) -> None:
    # The notebook's own cells (its imports, A2's liveness demo, A3's runs of the
    # library's heuristics at load time) run in the sandbox and are not refused.
    nb = json.loads((ASSIGN / NOTEBOOKS[key]).read_text())
    for cell in nb["cells"]:
        if "solution" in cell.get("metadata", {}).get("tags", []):
            cell["source"] = reference_solution_path(key).read_text()
    path = tmp_path / "student.ipynb"
    path.write_text(json.dumps(nb))
    report = grade(key, path, **few[key])
    assert report.full_marks, report.summary()


def test_the_refusal_names_the_import_and_what_is_allowed() -> None:
    why = check_import("a2", "minigraph.memory.planners", ("greedy",))
    assert why.startswith("your file imports minigraph.memory.planners.greedy, which it "
                          "may not: a submission for A2 may import from minigraph only ")
    assert "minigraph.memory (Buffer, theoretical_minimum, validate_offsets)" in why
    assert "minigraph.errors (any name)" in why
    assert check_import("a2", "minigraph.memory", ("Buffer", "validate_offsets")) is None
    assert check_import("a2", "minigraph", ("memory",)) is None   # a submodule allowed
    assert check_import("a1", "minigraph", ("memory",)).startswith(
        "your file imports minigraph.memory,")
    assert check_import("a3", "minigraph.runtime.dtr", ("*",)).startswith(
        "your file imports * from minigraph.runtime.dtr")
    assert check_import("a1", "numpy.linalg") is None
    assert check_import("a1", "minigraph.errors", ("*",)) is None
    assert set(ALLOWED) == {"a1", "a2", "a3"}
