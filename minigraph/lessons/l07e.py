"""Checks for lesson 07e's exercise (static checkpointing against DTR: the least compute
any schedule pays within a budget, Checkmate's proven optimum) [Jain 2020].

The expected value is computed here, by solving Checkmate's MILP within a work budget of
branch-and-bound nodes (the same answer on any machine at any load), when the check
runs; a wrong answer gets a hint at the reasoning, never the number.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from ..dtr_research import checkmate
from ..examples import linear_chain
from ..graph import Graph
from ..runtime.dtr import simulate

#: Exercise 1's budget: this share of DTR's total peak (the lesson's table tries others).
EXERCISE_1_RATIO = 0.55
#: The lesson's counting: unit costs, no alignment.
COUNTING = dict(costs="unit", alignment=1)
#: HiGHS's work budget, in branch-and-bound nodes (as in the lesson).
NODES = 100


def exercise_1_graph() -> Graph:
    """Exercise 1's graph: the lesson's chain of 10 forward and 10 backward unit ops."""
    return linear_chain(10)


@cache
def _optimum() -> float:
    opt = checkmate(exercise_1_graph(), ratio=EXERCISE_1_RATIO, node_limit=NODES,
                    time_limit=120, **COUNTING)
    if not opt.optimal:          # the check needs a proven optimum, not a best guess
        raise RuntimeError(f"checkmate did not prove optimality within {NODES} nodes")
    return opt.overhead


def _dtr() -> float:
    return simulate(exercise_1_graph(), ratio=EXERCISE_1_RATIO, heuristic="dtr",
                    **COUNTING).overhead


def exercise_1(answer: Any) -> tuple[bool, str]:
    """The least compute (an overhead factor, e.g. 1.5) that any schedule of
    `exercise_1_graph()` pays within `EXERCISE_1_RATIO` of DTR's total peak."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) \
            or not math.isfinite(answer) or answer < 1:
        return False, "give the overhead factor as a number >= 1 (1.0: nothing recomputed)"
    best = _optimum()
    if abs(answer - best) < 5e-4:
        return True, f"x{best:.3f}: no schedule within that budget pays less"
    if abs(answer - _dtr()) < 5e-4:
        return False, ("that is what DTR pays there, knowing only the past; a schedule "
                       "planned with the whole graph may pay less")
    if answer < best:
        return False, ("no schedule pays that little within this budget: a smaller budget "
                       "never lets a schedule pay less than the optimum of a larger one")
    return False, ("a cheaper schedule fits: look at the working memory each schedule "
                   "of the lesson's table really needs, or solve for this budget")
