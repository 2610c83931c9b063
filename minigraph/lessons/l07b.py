"""Checks for lesson 07b's exercise (what DTR's score estimates: the union-find classes of
evicted neighbours [Kirisame 2021; MegEngine 2021]). A check takes the student's answer and
says right or not quite, with a hint that points at the rule, never at the value, which
is computed here, with the runtime's own `DSU`, when the check runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..runtime.dtr.neighbourhood import DSU

#: Exercise 1's chain: each tensor is computed from the one before it, at this cost.
CHAIN_1 = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0, "f": 6.0, "g": 7.0}
EVICTED_1 = ("b", "c", "e", "f")      # evicted in this order; the others are resident
CANDIDATE_1 = "d"                      # the tensor being scored


def chain_neighbour_costs(costs: Mapping[str, float], evicted: Sequence[str],
                          candidate: str) -> tuple[float, float]:
    """(DTR-eq's neighbour cost, MegEngine's) of `candidate` on a chain, the runtime's
    rules (eviction.py): DTR-eq joins an evicted tensor with its evicted inputs and
    readers and counts each class of the candidate's evicted neighbours once; MegEngine
    joins it with its producer's inputs evicted before it (a chain has no sibling
    outputs) and counts, per evicted input, max(its class, its own cost). `evicted` is in
    eviction order, which MegEngine's classes depend on."""
    names = list(costs)
    ix = {k: i for i, k in enumerate(names)}
    n = len(names)
    inputs = [[i - 1] if i else [] for i in range(n)]
    readers = [[i + 1] if i + 1 < n else [] for i in range(n)]
    cost = [float(costs[k]) for k in names]
    eq, mge = DSU(n, cost), DSU(n, cost)
    for k in evicted:
        eq.add(ix[k], inputs[ix[k]] + readers[ix[k]])
        mge.add(ix[k], inputs[ix[k]])
    t = ix[candidate]
    roots = {eq.find(eq.node[y]) for y in inputs[t] + readers[t] if eq.node[y] >= 0}
    eq_cost = sum(eq.total[r] for r in roots)
    mge_cost = sum(max(mge.total[mge.find(mge.node[y])], cost[y])
                   for y in inputs[t] if mge.node[y] >= 0)
    return eq_cost, mge_cost


def exercise_1(answer: Any) -> tuple[bool, str]:
    """Right when `answer` is (DTR-eq's, MegEngine's) neighbour cost of CANDIDATE_1."""
    try:
        eq_given, mge_given = (float(x) for x in answer)
    except (TypeError, ValueError):
        return False, f"{answer!r} is not a pair of numbers: give (DTR-eq's, MegEngine's)"
    eq, mge = chain_neighbour_costs(CHAIN_1, EVICTED_1, CANDIDATE_1)
    hints = []
    if abs(eq_given - eq) > 1e-9:
        hints.append("DTR-eq's: join each evicted tensor with its evicted inputs and "
                     f"readers, then add the classes of {CANDIDATE_1}'s evicted neighbours, "
                     "on both sides, each once")
    if abs(mge_given - mge) > 1e-9:
        hints.append("MegEngine's: when a tensor is evicted, join it only with its "
                     "producer's inputs evicted before it, and charge "
                     f"{CANDIDATE_1} only for its input side: max(that class, the input's "
                     "own cost)")
    if hints:
        return False, "; ".join(hints)
    return True, (f"the two estimates differ by {eq - mge:g}: the evicted readers of "
                  f"{CANDIDATE_1}, which only DTR-eq counts")
