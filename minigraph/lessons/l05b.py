"""Exercise checks of lesson 05b (the schedule: GE's topo optimisation) [Huawei GE, §2].

Each `exercise_N(answer)` returns (right?, why) for `check_answers`; the expected value
is computed here, and a wrong answer gets a hint that does not give it away.
"""

from __future__ import annotations

from typing import Any

from ..memory import ORDERS, MemoryOptions, plan_memory
from ..models import get_model

#: The zoo model of exercise 1 and the settings its minima are compared under.
EXERCISE_1_MODEL = "cnn"
EXACT = MemoryOptions(planner="none", alignment=1)


def _minima_by_order(model: str = EXERCISE_1_MODEL) -> dict[str, int]:
    """The theoretical minimum of `model`'s training step under every order but "best"."""
    g = get_model(model).graph
    return {o: plan_memory(g, EXACT.replace(order=o)).theoretical_minimum
            for o in ORDERS if o != "best"}


def exercise_1(answer: Any) -> tuple[bool, str]:
    """Which order gives the zoo CNN the lowest theoretical minimum?"""
    if answer == "best":
        return False, "'best' only keeps the winner of the others: name the one it keeps"
    if not isinstance(answer, str) or answer not in ORDERS:
        return False, f"{answer!r} is not an order; the orders: {', '.join(ORDERS)}"
    mins = _minima_by_order()
    low = min(mins.values())
    if mins[answer] == low:
        return True, f"{answer!r}: {low:,} B, the lowest of {len(mins)} orders"
    return False, (f"{answer!r} gives {mins[answer]:,} B and another order gives less: "
                   "plan the model once per order and compare `theoretical_minimum`")
