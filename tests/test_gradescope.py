"""The Gradescope autograders of course/gradescope/, run as Gradescope runs them.

For each assignment the zip of `make_zip.py` is unpacked into `<root>/source` of a folder
laid out as Gradescope lays out /autograder (`source/`, `submission/`, `results/`), its
`run_autograder` copied to `<root>/run_autograder` and run there with AUTOGRADER_ROOT set
to that folder (and this interpreter instead of setup.sh's virtual environment, which needs
the network): results.json must be Gradescope's format, with the score that
`python -m minigraph.grading` gives the same file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from partial_answers import A1_PARTIAL, A2_HINT

from minigraph.grading.sandbox import isolation

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "course" / "gradescope"
ASSIGN = ROOT / "lessons" / "assignments"


def _kit_module(name: str):
    spec = importlib.util.spec_from_file_location(f"_gradescope_{name}", KIT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_zip = _kit_module("make_zip")

#: Partly right answers, one per assignment, and where a student's upload puts them.
SHOWN_A3 = '''import math


def my_heuristic(t, now):
    """h_DTR as lesson 07 shows it."""
    if t.pinned:
        return math.inf
    return (t.cost + t.neighbour_cost) / (t.size * t.staleness)
'''


def _notebook_with(code: str, name: str) -> str:
    """The assignment notebook with its solution cell replaced by `code`."""
    nb = json.loads((ASSIGN / name).read_text())
    cell = next(c for c in nb["cells"] if "solution" in c["metadata"].get("tags", []))
    cell["source"] = code
    return json.dumps(nb)


#: assignment -> {path under submission/: content}: what the student handed in
SUBMISSIONS = {
    "a1": {"lessons/assignments/A1_liveness.ipynb": _notebook_with(A1_PARTIAL, "A1_liveness.ipynb"),
           "README.md": "my repository\n", "notes.py": "x = 1\n"},
    "a2": {"planner.py": A2_HINT},
    "a3": {"heuristic.py": SHOWN_A3},
}


def _unzip(archive: Path, folder: Path) -> None:
    """Unpack with each file's mode, as Gradescope does (zipfile alone drops it)."""
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            out = Path(z.extract(info, folder))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(out, mode)


def _layout(tmp: Path, assignment: str, files: dict[str, str]) -> Path:
    """A Gradescope root: the autograder unzipped in source/, run_autograder beside it,
    the submission's files in submission/."""
    root = tmp / "autograder"
    archive = make_zip.make_zip(assignment, tmp / "zips")
    _unzip(archive, root / "source")
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    for rel, text in files.items():
        path = root / "submission" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "submission").mkdir(parents=True, exist_ok=True)
    return root


def _run_autograder(root: Path) -> tuple[dict, str]:
    run = subprocess.run([str(root / "run_autograder")], cwd=root, capture_output=True,
                         text=True, timeout=900,
                         env={**os.environ, "AUTOGRADER_ROOT": str(root),
                              "MINIGRAPH_PYTHON": sys.executable})
    results = root / "results" / "results.json"
    assert results.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(results.read_text()), run.stdout + run.stderr


def _grader_score(assignment: str, path: Path, tmp: Path) -> float:
    out = tmp / f"report-{assignment}.json"
    subprocess.run([sys.executable, "-m", "minigraph.grading", assignment, str(path),
                    "--quiet", "--json", str(out)], cwd=ROOT, capture_output=True,
                   timeout=900)
    return json.loads(out.read_text())["score"]


def test_the_zip_holds_the_recipe_and_the_oracles(tmp_path) -> None:
    archive = make_zip.make_zip("a2", tmp_path)
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist()}
    assert {"setup.sh", "run_autograder", "autograder.py", "repo/pyproject.toml",
            "repo/minigraph/grading/answers.json",
            "repo/lessons/assignments/solutions/a1.py"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert not any("__pycache__" in n for n in names)
    with zipfile.ZipFile(archive) as z:
        assert z.read("run_autograder") == (KIT / "a2" / "run_autograder").read_bytes()


@pytest.mark.parametrize("assignment", ["a1", "a2", "a3"])
def test_run_autograder_writes_the_graders_score(assignment, tmp_path) -> None:
    root = _layout(tmp_path, assignment, SUBMISSIONS[assignment])
    results, log = _run_autograder(root)
    assert isinstance(results["score"], float) and results["tests"], log[-3000:]
    for t in results["tests"]:
        assert {"name", "score", "max_score", "output"} <= set(t)
        assert 0 <= t["score"] <= t["max_score"]
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(results["score"],
                                                                      abs=0.01)
    if not isolation.jail().partial:   # isolated as fully under Gradescope's layout
        assert "Isolation:" not in results["output"], results["output"]
    graded = next(root / "submission" / rel for rel in SUBMISSIONS[assignment]
                  if rel.endswith((".ipynb", "planner.py", "heuristic.py")))
    assert results["score"] == _grader_score(assignment, graded, tmp_path)
    assert 0 < results["score"] < 100


def test_no_file_to_grade_scores_zero_and_says_what_to_submit(tmp_path) -> None:
    root = _layout(tmp_path, "a1", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    results, _ = _run_autograder(root)
    assert results["score"] == 0 and results["tests"] == []
    assert "submit your notebook A1_liveness.ipynb" in results["output"]
    assert "a.py, b.py" in results["output"]
