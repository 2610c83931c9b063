"""The DTR paper's uniform linear chain: n forward and n backward unit ops, unit-size
tensors, unit costs. DTR's h_DTR needs at most 1.55x the base compute with a budget of
2*sqrt(n) tensors and at most 1.85x with sqrt(n); LRU does worse."""

from __future__ import annotations

import math

import pytest

from minigraph.errors import ThrashError
from minigraph.examples import linear_chain
from minigraph.runtime.dtr import DTRRuntime, program_from_graph

UNIT = 4    # bytes of a one-element float32 tensor with alignment 1


def _overhead(n: int, budget_tensors: int, heuristic: str) -> float:
    p = program_from_graph(linear_chain(n), alignment=1, costs="unit")
    try:
        tr = DTRRuntime(p, budget_tensors * UNIT, heuristic, timeline=False).run()
    except ThrashError:
        return math.inf
    assert tr.base_cost == 2 * n
    return tr.overhead


@pytest.mark.parametrize("n", [100, 400, 1600])
def test_dtr_on_the_uniform_chain_with_two_sqrt_n_tensors(n):
    dtr = _overhead(n, int(2 * math.sqrt(n)), "dtr")
    assert dtr <= 1.55
    assert _overhead(n, int(2 * math.sqrt(n)), "lru") > dtr


@pytest.mark.parametrize("n", [100, 400, 1600])
def test_dtr_on_the_uniform_chain_with_sqrt_n_tensors(n):
    dtr = _overhead(n, int(math.sqrt(n)), "dtr")
    assert dtr <= 1.85
    assert _overhead(n, int(math.sqrt(n)), "lru") > dtr


def test_the_chain_needs_three_tensors_at_least_and_n_plus_one_without_remat():
    p = program_from_graph(linear_chain(50), alignment=1, costs="unit")
    b = p.bounds()
    assert (b.lower, b.peak) == (3 * UNIT, 51 * UNIT)
