"""Exercise checks of lesson 05 (GE's block reuse) [Huawei GE]; the schedule's are l05b's.

Each `exercise_N(answer)` returns (right?, why) for `check_answers`; the expected value
is computed here, and a wrong answer gets a hint that does not give it away.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from ..memory import Buffer, theoretical_minimum
from ..memory.instances import ge_worked_example, hard_instance
from ..memory.planners import plan_buffers
from ..memory.planners.ge import binary_ranges, reuse_blocks
from . import try_student
from .l01 import _count


def _binary_block_bytes() -> int:
    """Binary block reuse's arena on the worked example, exact bytes [Huawei GE, §1.1]."""
    return plan_buffers(ge_worked_example(), "ge-binary", alignment=1)[1].arena_bytes


def exercise_1(answer: Any) -> tuple[bool, str]:
    """Binary block's bytes on the five tensors of the worked example."""
    n = _count(answer)
    if n is None:
        return False, f"{answer!r} is not a whole number of bytes"
    if n == _binary_block_bytes():
        return True, ("A and C share a block; D's range is theirs but C is still alive "
                      "when D starts; B and E have ranges of their own")
    ranges = binary_ranges([b.size for b in ge_worked_example()])
    return False, (f"the ranges are {ranges}: put each tensor in the first range it fits, "
                   "walk the tensors by start step, reuse a block only of the same range "
                   "whose last tensor has died, then resize every block to its largest "
                   "tensor and add the blocks up")


def exercise_2(answer: Any) -> tuple[bool, str]:
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


def _binary_range(buffers: list[Buffer]) -> Callable[[Buffer], Hashable]:
    """Binary block's range rule for `buffers`: the first range ceiling a size fits."""
    ceilings = binary_ranges([b.size for b in buffers], align=1)
    return lambda b: next((c for c in ceilings if b.size <= c), ceilings[-1])


def exercise_3_cases() -> list[tuple[str, list[Buffer], str, Callable[[Buffer], Hashable]]]:
    """(name, buffers, range rule's name, range rule) of exercise 4's check."""
    worked = ge_worked_example()
    hard = [b for b in hard_instance(30, capacity=4096, seed=0, granule=64) if b.size]
    return [("the worked example, Max block", worked, "one range", lambda b: 0),
            ("the worked example, level 1", worked, "exact size", lambda b: b.size),
            ("the worked example, Binary block", worked, "binary", _binary_range(worked)),
            ("lesson 06's hard instance, Max block", hard, "one range", lambda b: 0),
            ("lesson 06's hard instance, Binary block", hard, "binary", _binary_range(hard))]


def exercise_3(fn: Callable[..., Any]) -> tuple[bool, str]:
    """The student's `my_reuse_blocks(buffers, range_of)` -> blocks (lists of buffer ids),
    against `reuse_blocks` on every case of `exercise_3_cases`."""
    if not callable(fn):
        return False, f"ANSWER_4 must be your function my_reuse_blocks, not {fn!r}"
    for name, buffers, _, range_of in exercise_3_cases():
        ok, got = try_student(fn, "my_reuse_blocks", name, list(buffers), range_of)
        if not ok:
            return False, got
        try:
            got = [[getattr(b, "id", b) for b in block] for block in got]
        except TypeError:
            return False, f"on {name}: return a list of blocks, each a list of buffer ids"
        want = [[b.id for b in block] for block in reuse_blocks(buffers, range_of)]
        if got == want:
            continue
        if sorted(map(sorted, got)) == sorted(map(sorted, want)):
            return False, (f"on {name}: the right groups; number the blocks in the order they "
                           "are opened, and list each block's buffers in the order they "
                           "take it")
        if len(got) != len(want):
            more = "more" if len(got) > len(want) else "fewer"
            return False, (f"on {name}: {more} blocks than GE opens: a buffer takes a free "
                           "block of its own range if there is one (free: its last buffer "
                           "ended before this one starts), the lowest-numbered first")
        return False, (f"on {name}: the blocks are grouped differently: walk the buffers "
                       "by start step (ties in list order), and reuse only a block of "
                       "the same range")
    return True, f"the same blocks as GE's reuse on all {len(exercise_3_cases())} cases"
