"""Checks for lesson 07bb's exercise (fragmentation under DTR): it takes the student's
answer and says right or not quite, with a hint that points at the rule, never at the
value, which is computed here, when the check runs."""

from __future__ import annotations

from typing import Any

from ..runtime.dtr import FirstFitArena

REQUEST_1 = 48            # exercise 1's output, bytes


def exercise_1_arena() -> tuple[FirstFitArena, dict[str, int]]:
    """Exercise 1's arena: 120 bytes, six tensors, two of them freed and a small one
    allocated since (returns the arena and each live tensor's offset)."""
    arena = FirstFitArena(120)
    at = {k: arena.alloc(n, k) for k, n in zip("pqrstu", (16, 24, 16, 32, 16, 16))}
    for k in "qt":
        arena.free(at.pop(k))
    at["y"] = arena.alloc(8, "y")
    return arena, at


def exercise_1(name: Any) -> tuple[bool, str]:
    """Right when evicting the one tensor `name` lets a REQUEST_1-byte output fit."""
    arena, at = exercise_1_arena()
    if name not in at:
        return False, f"{name!r} is not a tensor in the arena; the tensors are {sorted(at)}"
    left, right = arena.free_around(at[name])
    arena.free(at[name])
    if arena.can_fit(REQUEST_1):
        return True, (f"evicting {name} joins its {left + right} free neighbouring bytes "
                      "into one block that holds the output")
    return False, ("that block and the free bytes next to it are still too small together: "
                   "look at its left and right neighbours (arena.free_around)")
