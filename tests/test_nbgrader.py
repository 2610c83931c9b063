"""nbgrader, for real: docs/teaching.md's course round gives the grader's scores.

The round's commands are the code blocks of docs/teaching.md fenced as ```` ```bash instructor ````
and ```` ```bash student ````: this test runs them, in the doc's order, for a1, a2 and a3 (the
doc shows a1; the others are the same commands with their names), in a course directory in a
temporary folder (links to course/'s files) with nbgrader's exchange there too. Each user has
the JUPYTER_CONFIG_DIR a JupyterHub would give: the exchange's root and, for a student, their
id. Two students hand in through the exchange: alice the reference solution, bob a partly
right one. Then: the release holds no solution and is the students' notebook; nbgrader's
score equals `python -m minigraph.grading`'s for the same code (partial credit included);
private cases reach the kernels; the feedback reaches both students; and the doc's table of
A3 overheads is the grader's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from partial_answers import A1_PARTIAL, A2_HINT

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "teaching.md"
COURSE = ROOT / "course"
ASSIGN = ROOT / "lessons" / "assignments"
BLOCK = re.compile(r"^```bash (instructor|student)\n(.*?)^```", re.M | re.S)
# The students' repository (course/student_repo.py) has no course/ and no docs/teaching.md:
# nbgrader's round is the instructor's, so there this module is skipped, not an error.
WITHHELD_HERE = not (COURSE / "make_source.py").is_file() or not DOC.is_file()
if WITHHELD_HERE:
    pytest.skip("the students' repository: course/ and docs/teaching.md, nbgrader's round, "
                "stay with the instructor (course/student_repo.py)", allow_module_level=True)


def test_the_students_repository_collects_this_module_as_one_skip(tmp_path) -> None:
    dest = tmp_path / "students"
    made = subprocess.run([sys.executable, str(COURSE / "student_repo.py"), str(dest)],
                          capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    assert not (dest / "course").exists() and (dest / "tests" / "test_nbgrader.py").is_file()
    env = {**os.environ, "PYTHONPATH": str(dest)}
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-rs",
                        "-p", "no:cacheprovider", "tests/test_nbgrader.py"], cwd=dest,
                       env=env, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 5, out[-3000:]          # no test collected, and no error
    assert "error" not in out.lower(), out[-3000:]
    assert "SKIPPED [1] tests/test_nbgrader.py:" in out, out[-3000:]
    assert "the students' repository: course/ and docs/teaching.md" in out, out[-3000:]


def _course_module(name: str):
    spec = importlib.util.spec_from_file_location(f"_course_{name}", COURSE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_source = _course_module("make_source")
sys.modules.setdefault("make_source", make_source)   # crosscheck.py imports it by that name
crosscheck = _course_module("crosscheck")
NOTEBOOKS = make_source.NOTEBOOKS

#: Partly right answers: each scores between 0 and 100.
PARTIAL = {
    "a1": A1_PARTIAL,
    "a2": A2_HINT,
    "a3": '''import math


def my_heuristic(t, now):
    """Least recently used first: blind to what a tensor costs to recompute."""
    if t.pinned:
        return math.inf
    return -t.staleness
''',
}


def round_blocks() -> list[tuple[str, str]]:
    """The tested code blocks of docs/teaching.md, in order: (who, commands)."""
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def _for(assignment: str, text: str) -> str:
    return re.sub(r"\ba1\b", assignment, text)


def _fill(notebook: Path, solution: Path, function: str, out: Path) -> None:
    """`notebook` with its stub replaced by `function` from `solution`, written to `out`."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cell = make_source.solution_cell(nb)
    cell["source"] = make_source.fill_in("".join(cell["source"]), solution, function,
                                         markers=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(nb), encoding="utf-8")


def _grader(assignment: str, path: Path | None, env: dict, tmp: Path) -> dict:
    """`python -m minigraph.grading` on `path` (None: the reference) -> its JSON report."""
    out = tmp / f"report-{assignment}-{path.stem if path else 'reference'}.json"
    cmd = [sys.executable, "-m", "minigraph.grading", assignment] + (
        [str(path)] if path else []) + ["--json", str(out), "--min-score", "0"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert out.exists(), run.stdout + run.stderr
    return json.loads(out.read_text())


#: The students: who hands in what (None: the reference solution).
STUDENTS = {"alice": None, "bob": "partial"}


def _config(folder: Path, exchange: Path, student: str | None = None) -> Path:
    """A JUPYTER_CONFIG_DIR as a JupyterHub gives: the exchange, who the user is, and their
    own cache of what they submitted (in their home there)."""
    folder.mkdir(parents=True)
    text = (f"c = get_config()\nc.Exchange.root = {str(exchange)!r}\n"
            f"c.Exchange.cache = {str(folder / 'nbgrader_cache')!r}\n")
    if student:
        text += f"c.CourseDirectory.student_id = {student!r}\n"
    (folder / "nbgrader_config.py").write_text(text)
    return folder


# Session-wide: the round takes minutes, and with pytest-xdist the module's tests may be
# interleaved with others on their worker (a module fixture would then run twice).
@pytest.fixture(scope="session")
def course_round(tmp_path_factory) -> dict:
    """Run the doc's round for every assignment; what each step left behind."""
    tmp = tmp_path_factory.mktemp("round")
    course, exchange = tmp / "course", tmp / "exchange"
    course.mkdir()
    exchange.mkdir()
    for f in COURSE.glob("*.py"):
        (course / f.name).symlink_to(f)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MINIGRAPH_SOLUTION", "MINIGRAPH_PRIVATE"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    envs = {"instructor": {**env, "JUPYTER_CONFIG_DIR": str(_config(tmp / "jupyter",
                                                                    exchange))}}
    homes = {"instructor": course}
    for student in STUDENTS:
        homes[student] = tmp / student
        homes[student].mkdir()
        envs[student] = {**env, "JUPYTER_CONFIG_DIR": str(
            _config(tmp / f"jupyter-{student}", exchange, student))}
    blocks = round_blocks()
    doc_env = dict(re.findall(r"^export (MINIGRAPH_\w+)=(\S+)", "\n".join(
        text for _, text in blocks), re.M))
    results = {}
    for assignment, (name, function) in NOTEBOOKS.items():
        partial = tmp / f"partial_{assignment}.py"
        partial.write_text(PARTIAL[assignment])
        solutions = {"alice": ASSIGN / "solutions" / f"{assignment}.py", "bob": partial}
        logs = []
        for who, text in blocks:
            for user in ([who] if who == "instructor" else list(STUDENTS)):
                if "nbgrader submit" in text:     # the student fills in the notebook first
                    fetched = homes[user] / assignment / f"{name}.ipynb"
                    _fill(fetched, solutions[user], function, fetched)
                t0 = time.perf_counter()
                run = subprocess.run(["bash", "-euo", "pipefail", "-c", _for(assignment, text)],
                                     cwd=homes[user], env=envs[user], capture_output=True,
                                     text=True, timeout=1800)
                logs.append(f"$ ({user}, {time.perf_counter() - t0:.0f} s) "
                            f"{_for(assignment, text)}\n{run.stdout}{run.stderr}")
                with open(tmp / "round.log", "a") as log:
                    log.write(logs[-1] + "\n")
                assert run.returncode == 0, "\n".join(logs)[-6000:]
        grader_env = {**env, **doc_env}
        book = f"sqlite:///{course / 'gradebook.db'}"
        results[assignment] = {
            "gradebook": crosscheck.nbgrader_scores(assignment, book),
            "partial": _grader(assignment, partial, grader_env, tmp),
            "reference": (_grader(assignment, None, grader_env, tmp)
                          if assignment == "a3" else None),
            "log": "\n".join(logs)}
    return {"tmp": tmp, "course": course, "homes": homes, "results": results,
            "doc_env": doc_env}


# ---------------------------------------------------------------------------------------
# The metadata (fast)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("assignment", sorted(NOTEBOOKS))
def test_points_sum_to_the_graders_total(assignment) -> None:
    name, function = NOTEBOOKS[assignment]
    nb = json.loads((ASSIGN / f"{name}.ipynb").read_text(encoding="utf-8"))
    meta = [c["metadata"]["nbgrader"] for c in nb["cells"] if "nbgrader" in c["metadata"]]
    assert all(m["schema_version"] == 3 for m in meta)
    ids = [m["grade_id"] for m in meta]
    assert len(ids) == len(set(ids)), ids
    graded = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    # The grader scores out of 100; so does the one test cell, with the number it shows.
    assert sum(c["metadata"]["nbgrader"]["points"] for c in graded) == 100
    assert [c["metadata"].get("tags") for c in graded] == [["check"]]
    assert "".join(graded[0]["source"]).splitlines()[-1].startswith("report.score")
    solution = make_source.solution_cell(nb)
    assert solution["metadata"]["tags"] == ["solution"]
    assert f"def {function}(" in "".join(solution["source"])


TAMPERED_A1 = """import minigraph.grading


class _Forged:
    score = 100.0


minigraph.grading.check_liveness = lambda fn, **kw: _Forged()   # the kernel's check, replaced


def my_liveness(graph, schedule, alignment=512):
    raise NotImplementedError
"""


def _executed(solution_source: str, kernel_said: str):
    """A1's notebook as nbgrader's Execute leaves it: the solution cell holding
    `solution_source`, the check cell ending with `kernel_said`."""
    import nbformat
    nb = nbformat.read(ASSIGN / "A1_liveness.ipynb", as_version=4)
    make_source.solution_cell(nb)["source"] = solution_source
    check = next(c for c in nb.cells if "check" in c.metadata.get("tags", []))
    check.outputs = [nbformat.v4.new_output("execute_result", execution_count=1,
                                            data={"text/plain": kernel_said})]
    return nb, check


def test_autograde_keeps_the_sandboxed_score_of_a_tampered_notebook() -> None:
    # A notebook that replaces check_liveness in its kernel prints 100 there; autograde's
    # SandboxedScore (course/nbgrader_config.py) makes the cell's points the sandboxed
    # grader's: 0, the file "changes minigraph itself". nbgrader reads those points.
    from nbgrader.utils import determine_grade
    scored = _course_module("sandboxed_score")
    nb, check = _executed(TAMPERED_A1, "100.0")
    scored.SandboxedScore().preprocess(nb, {"nbgrader": {"assignment": "a1"}})
    assert determine_grade(check) == (0.0, 100.0), check.outputs
    note = "".join(o.get("text", "") for o in check.outputs if o.output_type == "stream")
    assert "scores this notebook 0.0 (not graded: your file changes minigraph itself" in note
    assert "the check in your kernel said 100.0" in note
    # An honest notebook keeps its score, and no note.
    honest = make_source.fill_in(_stub_a1(), ASSIGN / "solutions" / "a1.py", "my_liveness",
                                 markers=False)
    nb, check = _executed(honest, "100.0")
    scored.SandboxedScore().preprocess(nb, {"nbgrader": {"assignment": "a1"}})
    assert determine_grade(check) == (100.0, 100.0), check.outputs
    assert not [o for o in check.outputs if o.output_type == "stream"], check.outputs


def _stub_a1() -> str:
    nb = json.loads((ASSIGN / "A1_liveness.ipynb").read_text(encoding="utf-8"))
    return "".join(make_source.solution_cell(nb)["source"])


def test_the_round_has_a_worker_of_its_own(request) -> None:
    """With `--dist loadgroup` (.ci/run) this module's tests share one worker, so the
    session's course round runs once; pytest 9.2 broke pytest-xdist 3.8's groups (hence
    the pin in pyproject.toml), and the round then ran on both workers."""
    if getattr(request.config.option, "loadgroup", False):   # set by xdist on its workers
        assert request.node.nodeid.endswith("@nbgrader"), request.node.nodeid


def test_make_source_refuses_a_solution_that_does_not_fit(tmp_path) -> None:
    wrong = tmp_path / "a1.py"
    wrong.write_text("def my_liveness(graph, schedule):\n    return {}, 0\n")
    with pytest.raises(ValueError, match="does not match the stub"):
        make_source.source_notebook("a1", wrong)
    wrong.write_text("def liveness(graph, schedule, alignment=512):\n    return {}, 0\n")
    with pytest.raises(ValueError, match="no function my_liveness"):
        make_source.source_notebook("a1", wrong)


def test_the_doc_has_the_round() -> None:
    blocks = round_blocks()
    text = "\n".join(t for _, t in blocks)
    for step in ["make_source.py", "generate_assignment a1", "release_assignment a1",
                 "fetch_assignment a1", "submit a1", "collect a1", "autograde a1",
                 "crosscheck.py a1", "generate_feedback a1", "release_feedback a1",
                 "export", "fetch_feedback a1", "MINIGRAPH_PRIVATE"]:
        assert step in text, step


def test_student_repository_withholds_the_solutions(tmp_path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    student_repo = _course_module("student_repo")
    assert student_repo.main([str(tmp_path / "students")]) == 0
    out = tmp_path / "students"
    assert not (out / "lessons" / "assignments" / "solutions").exists()
    assert not (out / "course").exists()
    for name, _ in NOTEBOOKS.values():
        assert (out / "lessons" / "assignments" / f"{name}.ipynb").exists()


# ---------------------------------------------------------------------------------------
# The round (slow: nbgrader runs every notebook)
# ---------------------------------------------------------------------------------------

def _solution_lines(assignment: str) -> list[str]:
    """Lines of the reference solution's code that a stub cannot contain."""
    _, body = make_source.solution_body(ASSIGN / "solutions" / f"{assignment}.py",
                                        NOTEBOOKS[assignment][1])
    return [ln.strip() for ln in body.splitlines()
            if len(ln.strip()) > 20 and not ln.strip().startswith(("#", '"', "import"))]


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(NOTEBOOKS))
def test_release_holds_no_solution(course_round, assignment) -> None:
    name, _ = NOTEBOOKS[assignment]
    course = course_round["course"]
    lines = _solution_lines(assignment)
    assert lines
    source = (course / "source" / assignment / f"{name}.ipynb").read_text()
    assert all(json.dumps(ln)[1:-1] in source for ln in lines)     # the source has them
    given = [course / "release" / assignment / f"{name}.ipynb"]
    given += list((course_round["tmp"] / "exchange").rglob(f"outbound/{assignment}/*.ipynb"))
    assert len(given) == 2
    for path in given:
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert not [ln for ln in lines if json.dumps(ln)[1:-1] in text], path
    # The release is the students' notebook of lessons/assignments/, nbgrader's marks aside.
    release = json.loads(given[0].read_text())["cells"]
    ours = json.loads((ASSIGN / f"{name}.ipynb").read_text())["cells"]
    assert ["".join(c["source"]) for c in release] == ["".join(c["source"]) for c in ours]


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(NOTEBOOKS))
def test_autograde_scores_equal_the_graders(course_round, assignment) -> None:
    res = course_round["results"][assignment]
    book = res["gradebook"]
    assert set(book) == set(STUDENTS), book
    assert book["alice"] == 100.0, res["log"][-4000:]
    # Partial credit: nbgrader's points are the grader's score of the same code as a .py.
    assert 0 < book["bob"] < 100, res["log"][-4000:]
    assert book["bob"] == pytest.approx(res["partial"]["score"], abs=0.01)
    # crosscheck.py (run by the doc's commands) printed both for each student.
    for student, score in book.items():
        assert re.search(rf"^{student} +{score:.2f} +{score:.2f}$", res["log"], re.M), \
            res["log"][-4000:]


@pytest.mark.slow
def test_private_cases_reached_the_kernels(course_round) -> None:
    assert course_round["doc_env"], "the doc's round sets no private cases"
    # A seed adds 12 generated graphs to A1 and 8 buffer lists to A2 (what the doc says).
    for assignment, added in (("a1", 12), ("a2", 8)):
        cases = course_round["results"][assignment]["partial"]["cases"]
        assert sum(c["source"] == "private" for c in cases) == added
    html = next((course_round["course"] / "feedback" / "bob" / "a1").glob("*.html"))
    assert "private" in html.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(NOTEBOOKS))
def test_feedback_reaches_the_student(course_round, assignment) -> None:
    name, _ = NOTEBOOKS[assignment]
    for student in STUDENTS:
        home = course_round["homes"][student]
        fetched = list((home / assignment / "feedback").rglob(f"{name}.html"))
        assert len(fetched) == 1, student
        if STUDENTS[student] is None:
            assert "score 100.0/100" in fetched[0].read_text()
        grades = (course_round["course"] / "grades.csv").read_text()
        assert re.search(rf"^{assignment},.*,{student},", grades, re.M), grades


@pytest.mark.slow
def test_doc_table_of_a3_overheads_is_the_graders(course_round) -> None:
    report = course_round["results"]["a3"]["reference"]
    assert report["score"] == 100.0
    rows = {r["case"]: r for r in report["comparison"]}
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- a3-40:", 1)[1].split("\n\n", 1)[0]
    lines = [ln.strip().strip("|").split("|") for ln in table.splitlines()[1:]]
    cases = [c.strip() for c in lines[0][1:]]
    assert len(cases) == 4
    for cells in lines[2:]:
        heuristic, values = cells[0].strip(), [v.strip() for v in cells[1:]]
        for case, shown in zip(cases, values):
            value = rows[case][heuristic]
            printed = f"{value:.3f}" if isinstance(value, float) else str(value)
            assert printed == shown, (heuristic, case, value)


def test_source_folder_is_not_committed() -> None:
    # The nbgrader source notebooks hold the solutions: make_source.py writes them, git
    # ignores them, and the student repository withholds course/ altogether.
    ignored = (COURSE / ".gitignore").read_text().split()
    assert "/source/" in ignored and "/gradebook.db" in ignored
    if shutil.which("git") and (ROOT / ".git").exists():
        run = subprocess.run(["git", "ls-files", "course/source"], cwd=ROOT,
                             capture_output=True, text=True)
        assert run.stdout == ""
