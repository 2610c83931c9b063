"""pytest integration: a `--student PATH` option and one report fixture per assignment.

tests/grading/conftest.py imports these; a course repository without that folder can
load them as a plugin: `pytest -p minigraph.grading.sandbox.pytest_plugin -m a2
--student=FILE`. Without --student (or MINIGRAPH_STUDENT) the reference solution is graded.
"""

from __future__ import annotations

import os

import pytest

from ..reference import reference_solution_path
from ..report import GradeReport
from . import grade

# The pytest grading keeps the A2 leaderboard to the fast planners.
PYTEST_OPTIONS = {"a2": {"leaderboard": ("refcount", "greedy-size", "bestfit")}}


def pytest_addoption(parser: pytest.Parser) -> None:
    try:
        parser.addoption("--student", action="store", default=None,
                         help="path to a student's solution file to grade (markers a1, a2, a3)")
    except ValueError:      # declared already (tests/conftest.py)
        pass


def student_file(config: pytest.Config, assignment: str) -> str:
    """The file to grade: --student, else MINIGRAPH_STUDENT, else the reference solution."""
    given = config.getoption("--student", default=None) or os.environ.get("MINIGRAPH_STUDENT")
    return given or str(reference_solution_path(assignment))


_reports: dict[tuple[str, str], GradeReport] = {}


def graded(config: pytest.Config, assignment: str) -> GradeReport:
    """The report of one assignment for the file to grade, computed once per session; the
    file is imported and run only in a child process (`grade`)."""
    path = student_file(config, assignment)
    key = (assignment, path)
    if key not in _reports:
        report = grade(assignment, path, **PYTEST_OPTIONS.get(assignment, {}))
        print(f"\n[{assignment}] {path}\n{report.summary()}")
        _reports[key] = report
    return _reports[key]


@pytest.fixture
def a1_report(request: pytest.FixtureRequest) -> GradeReport:
    return graded(request.config, "a1")


@pytest.fixture
def a2_report(request: pytest.FixtureRequest) -> GradeReport:
    return graded(request.config, "a2")


@pytest.fixture
def a3_report(request: pytest.FixtureRequest) -> GradeReport:
    return graded(request.config, "a3")
