"""Checks for lesson 07's exercises (DTR): each takes the student's answer and says right or
not quite, with a hint that does not give the answer away. The expected values are
computed here, out of the notebook, so no cell shows them."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import MinigraphError, ThrashError
from ..examples import linear_chain
from ..runtime.dtr import FirstFitArena, budget_bounds, simulate

UNIT = 4                  # bytes of a one-element float32 tensor (alignment 1)
CHAIN = 200               # exercise 1's chain length: budget sqrt(CHAIN) tensors
REQUEST_2 = 48            # exercise 2's output, bytes


def chain_overhead(score: Any, n: int = CHAIN) -> float:
    """Compute overhead of `score` on `linear_chain(n)` with sqrt(n) unit tensors of budget
    (math.inf when it thrashes): the DTR paper's first experiment [Kirisame 2021]."""
    budget = int(math.sqrt(n)) * UNIT
    try:
        return simulate(linear_chain(n), budget, heuristic=score, costs="unit",
                        alignment=1).overhead
    except ThrashError:
        return math.inf


def exercise_1(score: Callable[..., float]) -> tuple[bool, str]:
    """Right when the student's score(t, now) needs less compute than LRU on the chain."""
    if not callable(score):
        return False, f"ANSWER_1 must be your function score(t, now), not {score!r}"
    try:
        mine = chain_overhead(score)
    except NotImplementedError:
        return False, "my_score still raises NotImplementedError: write its body first"
    except (MinigraphError, ArithmeticError, TypeError, AttributeError) as e:
        return False, f"your score failed: {type(e).__name__}: {e}"
    lru = chain_overhead("lru")
    mine_s = "thrashes" if math.isinf(mine) else f"x{mine:.3f}"
    if mine < lru:
        return True, f"yours {mine_s}, lru x{lru:.3f}"
    return False, (f"yours {mine_s}, lru x{lru:.3f}: a good victim is cheap to recompute, "
                   "big, and has not been used for a long time")


def exercise_2_arena() -> tuple[FirstFitArena, dict[str, int]]:
    """Exercise 2's arena: 120 bytes, six tensors, two of them freed and a small one
    allocated since (returns the arena and each live tensor's offset)."""
    arena = FirstFitArena(120)
    at = {k: arena.alloc(n, k) for k, n in zip("pqrstu", (16, 24, 16, 32, 16, 16))}
    for k in "qt":
        arena.free(at.pop(k))
    at["y"] = arena.alloc(8, "y")
    return arena, at


def exercise_2(name: Any) -> tuple[bool, str]:
    """Right when evicting the one tensor `name` lets a REQUEST_2-byte output fit."""
    arena, at = exercise_2_arena()
    if name not in at:
        return False, f"{name!r} is not a tensor in the arena; the tensors are {sorted(at)}"
    left, right = arena.free_around(at[name])
    arena.free(at[name])
    if arena.can_fit(REQUEST_2):
        return True, (f"evicting {name} joins its {left + right} free neighbouring bytes "
                      "into one block that holds the output")
    return False, ("that block and the free bytes next to it are still too small together: "
                   "look at its left and right neighbours (arena.free_around)")


def exercise_3(answer: Any) -> tuple[bool, str]:
    """Right when `answer` is budget_bounds(linear_chain(n)).lower in unit tensors (the
    same for every n >= 2; checked on a chain of 50)."""
    truth = budget_bounds(linear_chain(50), costs="unit", alignment=1).lower // UNIT
    if answer == truth:
        return True, "a backward op holds its two inputs and its output at once"
    return False, ("count what the largest single op must hold at once: its inputs, its "
                   "outputs and its workspace")
