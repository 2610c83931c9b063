"""Exercise checks of lesson 05 (GE's block reuse and the schedule) [Huawei GE].

Each `exercise_N(answer)` returns (right?, why) for `check_answers`; the expected value
is computed here, and a wrong answer gets a hint that does not give it away.
"""

from __future__ import annotations

from typing import Any

from ..memory import ORDERS, Buffer, MemoryOptions, plan_memory, theoretical_minimum
from ..memory.instances import ge_worked_example
from ..memory.planners import plan_buffers
from ..memory.planners.ge import binary_ranges
from ..models import get_model
from .l01 import _count

#: The zoo model of exercise 2 and the settings its minima are compared under.
EXERCISE_2_MODEL = "cnn"
EXACT = MemoryOptions(planner="none", alignment=1)


def binary_block_bytes() -> int:
    """Binary block reuse's arena on the worked example, exact bytes [Huawei GE, §1.1]."""
    return plan_buffers(ge_worked_example(), "ge-binary", alignment=1)[1].arena_bytes


def exercise_1(answer: Any) -> tuple[bool, str]:
    """Binary block's bytes on the five tensors of the worked example."""
    n = _count(answer)
    if n is None:
        return False, f"{answer!r} is not a whole number of bytes"
    if n == binary_block_bytes():
        return True, ("A and C share a block; D's range is theirs but C is still alive "
                      "when D starts; B and E have ranges of their own")
    ranges = binary_ranges([b.size for b in ge_worked_example()])
    return False, (f"the ranges are {ranges}: put each tensor in the first range it fits, "
                   "walk the tensors by start step, reuse a block only of the same range "
                   "whose last tensor has died, then resize every block to its largest "
                   "tensor and add the blocks up")


def minima_by_order(model: str = EXERCISE_2_MODEL) -> dict[str, int]:
    """The theoretical minimum of `model`'s training step under every order but "best"."""
    g = get_model(model).graph
    return {o: plan_memory(g, EXACT.replace(order=o)).theoretical_minimum
            for o in ORDERS if o != "best"}


def exercise_2(answer: Any) -> tuple[bool, str]:
    """Which order gives the zoo CNN the lowest theoretical minimum?"""
    if answer == "best":
        return False, "'best' only keeps the winner of the others: name the one it keeps"
    if not isinstance(answer, str) or answer not in ORDERS:
        return False, f"{answer!r} is not an order; the orders: {', '.join(ORDERS)}"
    mins = minima_by_order()
    low = min(mins.values())
    if mins[answer] == low:
        return True, f"{answer!r}: {low:,} B, the lowest of {len(mins)} orders"
    return False, (f"{answer!r} gives {mins[answer]:,} B and another order gives less: "
                   "plan the model once per order and compare `theoretical_minimum`")


def exercise_3(answer: Any) -> tuple[bool, str]:
    """A buffer list on which GE's two-level reuse stays above the theoretical minimum."""
    if (not isinstance(answer, (list, tuple)) or not answer
            or not all(isinstance(b, Buffer) for b in answer)):
        return False, "give a non-empty list of mg.Buffer(id, start, end, size)"
    placement = plan_buffers(list(answer), "ge", alignment=1)[1]
    arena, low = placement.arena_bytes, theoretical_minimum(list(answer))
    if arena > low:
        return True, f"GE {arena} B against a theoretical minimum of {low} B"
    return False, (f"GE reaches the minimum ({low} B) here; try blocks of different sizes "
                   "where a small block's life overlaps two larger blocks that could "
                   "otherwise share an address")
