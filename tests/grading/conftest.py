"""Grading a student's file with pytest (minitorch style).

    pytest tests/grading -m a2 --student path/to/solution.py     # a .py or the .ipynb

Without --student (or MINIGRAPH_STUDENT) these tests grade the reference solutions in
lessons/assignments/solutions/, so the suite stays green. Each assignment is graded once
per session; its tests then assert on parts of the one report, so a GitHub Classroom
autograder can give points per test.
"""

from __future__ import annotations

import os

import pytest

from minigraph.grading import ASSIGNMENTS, load_function, reference_solution_path


def pytest_addoption(parser: pytest.Parser) -> None:
    try:
        parser.addoption("--student", action="store", default=None,
                         help="path to a student's solution file to grade (markers a1, a2, a3)")
    except ValueError:      # tests/conftest.py declares it already
        pass


def student_file(config: pytest.Config, assignment: str) -> str:
    given = config.getoption("--student") or os.environ.get("MINIGRAPH_STUDENT")
    return given or str(reference_solution_path(assignment))


_reports: dict[str, object] = {}


def graded(config: pytest.Config, assignment: str, **kw):
    """The report of the student's (or the reference) file for one assignment, once."""
    if assignment not in _reports:
        check, name, _ = ASSIGNMENTS[assignment]
        path = student_file(config, assignment)
        fn = load_function(path, name)
        report = check(fn, **kw)
        print(f"\n[{assignment}] {path}\n{report.summary()}")
        _reports[assignment] = report
    return _reports[assignment]


@pytest.fixture
def a1_report(request: pytest.FixtureRequest):
    return graded(request.config, "a1")


@pytest.fixture
def a2_report(request: pytest.FixtureRequest):
    return graded(request.config, "a2", leaderboard=("refcount", "greedy-size", "bestfit"))


@pytest.fixture
def a3_report(request: pytest.FixtureRequest):
    return graded(request.config, "a3")
