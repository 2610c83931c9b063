"""Grading a student's file with pytest (minitorch style).

    pytest tests/grading -m a2 --student path/to/solution.py     # a .py or the .ipynb
    pytest -m a2 --student path/to/solution.py                   # from the repository root

Without --student (or MINIGRAPH_STUDENT) these tests grade the reference solutions in
lessons/assignments/solutions/, so the suite stays green. Each assignment is graded once
per session; its tests then assert on parts of the one report, so a GitHub Classroom
autograder can give points per test. The option and fixtures live in
minigraph/grading/sandbox/pytest_plugin.py (loaded for the whole suite by pyproject.toml).
"""

from minigraph.grading.sandbox.pytest_plugin import (  # noqa: F401
    a1_report,
    a2_report,
    a3_report,
)
