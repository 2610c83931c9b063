"""Lesson 10's exercise checks accept the right answer and reject wrong ones without
stating the answer."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from minigraph.errors import BudgetError, ThrashError  # noqa: E402
from minigraph.lessons import l10  # noqa: E402
from minigraph.runtime.dtr import simulate  # noqa: E402

nn, F = torch.nn, torch.nn.functional


def _case(*layers, loss=F.cross_entropy, classes=3):
    torch.manual_seed(0)
    x, y = torch.randn(5, 6), torch.randint(0, classes, (5,))
    return nn.Sequential(*layers), (x,), loss, (y,)


def test_exercise_1_accepts_a_model_that_maps_and_matches_pytorch():
    ok, why = l10.exercise_1(_case(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)))
    assert ok and "PyTorch" in why
    # a bare tensor for the inputs and targets is taken as a one-element tuple
    module, (x,), loss, (y,) = _case(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    assert l10.exercise_1((module, x, loss, y))[0]


class _Erf(nn.Module):
    def forward(self, x):
        return torch.erf(x)


def test_exercise_1_names_what_is_wrong():
    ok, why = l10.exercise_1(_case(nn.Linear(6, 8), _Erf(), nn.Linear(8, 3)))
    assert not ok and "no minigraph kernel" in why          # erf stays opaque
    ok, why = l10.exercise_1(_case(nn.Linear(6, 3)))
    assert not ok and "parameter tensors" in why
    for wrong in (None, 3, "net", (nn.Linear(6, 3),)):
        ok, why = l10.exercise_1(wrong)
        assert not ok and "ANSWER_1 must be" in why


def test_exercise_2_accepts_only_the_smallest_ratio_dtr_finishes_at():
    graph = l10.gpt_graph()
    finished = []
    for r in l10.RATIOS_2:
        try:
            simulate(graph, ratio=r, heuristic="dtr")
            finished.append(r)
        except (BudgetError, ThrashError):
            pass
    assert finished and min(finished) < max(l10.RATIOS_2), "exercise 2 must need a search"
    right = min(finished)
    ok, why = l10.exercise_2(right)
    assert ok
    for wrong in [r for r in l10.RATIOS_2 if r != right] + [0.55, "0.7", None, True]:
        ok, why = l10.exercise_2(wrong)
        assert not ok and f"{right} " not in why.replace(str(l10.RATIOS_2), "")
