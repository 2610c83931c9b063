"""The assignment grades as tests: `pytest tests/grading -m a1 --student FILE` (a2, a3).

Each test checks one part of the report and prints the whole summary when it fails, so
a student sees the first failing case and its reproducer in the test output.
"""

from __future__ import annotations

import pytest


def _cases(report, source: str | None = None):
    return [c for c in report.cases if source is None or c.source == source]


def _require(ok: bool, report) -> None:
    # A file that could not be graded (it did not load, exited, hung...) fails every test.
    if not ok or report.status.startswith("not graded"):
        pytest.fail(report.summary(), pytrace=False)


@pytest.mark.a1
def test_a1_is_implemented(a1_report) -> None:
    _require(a1_report.implemented, a1_report)


@pytest.mark.a1
def test_a1_public_graphs_right(a1_report) -> None:
    _require(all(c.passed for c in _cases(a1_report, "public")), a1_report)


@pytest.mark.a1
def test_a1_generated_graphs_right(a1_report) -> None:
    _require(all(c.passed for c in _cases(a1_report, "generated")), a1_report)


@pytest.mark.a1
def test_a1_private_cases_right(a1_report) -> None:
    _require(all(c.passed for c in _cases(a1_report, "private")), a1_report)


@pytest.mark.a2
def test_a2_is_implemented(a2_report) -> None:
    _require(a2_report.implemented, a2_report)


@pytest.mark.a2
def test_a2_every_plan_valid(a2_report) -> None:
    _require(a2_report.implemented and a2_report.n_passed == a2_report.total, a2_report)


@pytest.mark.a2
def test_a2_arena_matches_the_target(a2_report) -> None:
    _require(a2_report.full_marks, a2_report)


@pytest.mark.a3
def test_a3_is_implemented(a3_report) -> None:
    _require(a3_report.implemented, a3_report)


@pytest.mark.a3
def test_a3_every_run_correct(a3_report) -> None:
    _require(a3_report.implemented and a3_report.n_passed == a3_report.total, a3_report)


@pytest.mark.a3
def test_a3_overhead_matches_the_target(a3_report) -> None:
    _require(a3_report.full_marks, a3_report)
