"""Lesson 10b's exercise check accepts the right answer and rejects wrong ones without
stating the answer."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from minigraph.errors import BudgetError, ThrashError  # noqa: E402
from minigraph.experiments.estimate import DTR_OPTIONS, GB  # noqa: E402
from minigraph.lessons import l10b  # noqa: E402
from minigraph.runtime.dtr import budget_bounds, simulate  # noqa: E402


def _cost(graph, device):
    """DTR's compute on `device` GB, worked out as the exercise tells a student to."""
    b = budget_bounds(graph)
    budget = int(device * GB) - b.external
    if budget >= b.peak:
        return 1.0
    try:
        return simulate(graph, budget=budget, options=DTR_OPTIONS).overhead
    except (BudgetError, ThrashError):
        return None


def test_exercise_1_accepts_only_the_smallest_device_within_the_price():
    g = l10b.resnet50_training()
    cost = {d: _cost(g, d) for d in l10b.DEVICES_1}
    fine = [d for d, c in cost.items() if c is not None and c <= l10b.MAX_OVERHEAD_1]
    # the exercise needs a search: neither the smallest device nor the largest is the answer
    assert fine and min(fine) not in (min(l10b.DEVICES_1), max(l10b.DEVICES_1))
    assert any(c is not None and c > l10b.MAX_OVERHEAD_1 for c in cost.values())
    right = min(fine)
    ok, why = l10b.exercise_1(right)
    assert ok, why
    for wrong in [d for d in l10b.DEVICES_1 if d != right] + [3, 0.8, "2", None, True]:
        ok, why = l10b.exercise_1(wrong)
        assert not ok
        assert f"{right} GB" not in why
