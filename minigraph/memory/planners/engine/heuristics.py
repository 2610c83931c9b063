"""The engine room's greedy-size, best fit and GE two-level: the textbook loops, run fast.

Each planner here calls its textbook twin's own loop - greedy.py's `place_in_order`,
bestfit.py's `bestfit_offsets`, ge.py's `ge_offsets` - and changes only what sits behind
it, never what it does: the placed boxes in `box_index` (boxes.py) instead of greedy.py's
`PlacedBoxes`, the skyline in a heap and the unplaced buffers in a tree (skyline.py)
instead of bestfit.py's lists. The registry's "greedy-size", "bestfit" and "ge" are these;
"greedy-size:textbook", "bestfit:textbook" and "ge:textbook" the plain ones, with the same
offsets (tests/test_planner_tiers.py).

What the searching planners need of the heuristics is here too: a `Deadline` (budget.py),
past which a heuristic raises `OutOfTime` carrying the offsets placed so far, and
`start_plans`, the heuristic plans that anneal.py, ilp.py and search.py start from.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from ...buffers import Buffer, Placement
from .. import bestfit, ge, greedy, register
from ..ge import GE_ALIGN
from ..greedy import size_order
from .boxes import box_index, overlapping_pairs
from .budget import NEVER, Deadline, OutOfTime, stack_unplaced
from .skyline import Skyline, Unplaced


@register("greedy-size")
def plan_greedy_size(buffers: Sequence[Buffer], *, fit: str = "lowest") -> Placement:
    """greedy.py's `plan_greedy_size` [Pisarchyk 2020], the placed boxes in `box_index`:
    O(n log n) for bounded overlap."""
    offsets = place_in_order(buffers, size_order(buffers), fit)
    return Placement.of(buffers, {b.id: off for b, off in zip(buffers, offsets)})


@register("bestfit")
def plan_bestfit(buffers: Sequence[Buffer]) -> Placement:
    """bestfit.py's `plan_bestfit` [Sekiyama 2018, fig. 1], its skyline in a heap and its
    unplaced buffers in a tree (skyline.py): O(n log n) for short lines."""
    offsets = bestfit_offsets(buffers)
    return Placement.of(buffers, {b.id: o for b, o in zip(buffers, offsets)})


@register("ge")
def plan_ge(buffers: Sequence[Buffer], *, alignment: int = GE_ALIGN, holes: bool = True
            ) -> Placement:
    """ge.py's `plan_ge`, GE's two-level reuse [Huawei GE, §1.2], level 2 asking
    `box_index`. `holes=False`: a block's lifetime is its hull (see ge.py)."""
    return ge.two_level_placement(buffers, *ge_offsets(buffers, alignment, holes))


def place_in_order(buffers: Sequence[Buffer], order: Sequence[int], fit: str = "lowest",
                   deadline: Deadline = NEVER) -> list[int]:
    """greedy.py's `place_in_order` with `box_index`. Past `deadline`: `OutOfTime`
    carrying the offsets placed so far (-1: not yet)."""
    if deadline.at is None:
        return greedy.place_in_order(buffers, order, fit, box_index)
    timed = Timed(deadline, "greedy-size")
    try:
        return greedy.place_in_order(buffers, order, fit, timed.index)
    except OutOfTime:
        queue = [i for i in order if buffers[i].size]       # box k: the k-th one placed
        partial = [0] * len(buffers)
        for k, i in enumerate(queue):
            partial[i] = timed.placed[k] if k < len(timed.placed) else -1
        raise OutOfTime("greedy-size", partial) from None


def bestfit_offsets(buffers: Sequence[Buffer], deadline: Deadline = NEVER) -> list[int]:
    """bestfit.py's `bestfit_offsets` with skyline.py's structures. Past `deadline`:
    `OutOfTime` carrying the offsets placed so far (-1: not yet)."""
    return bestfit.bestfit_offsets(buffers, Skyline, lambda bufs: Unplaced(bufs, deadline))


def ge_offsets(buffers: Sequence[Buffer], alignment: int = GE_ALIGN, holes: bool = True,
               deadline: Deadline = NEVER
               ) -> tuple[dict[Hashable, int], list[list[Buffer]]]:
    """ge.py's `ge_offsets` with `box_index` (past `deadline`: OutOfTime)."""
    index = box_index if deadline.at is None else Timed(deadline, "ge").index
    return ge.ge_offsets(buffers, alignment, holes, index)


class Timed:
    """`box_index`, stopped by a deadline: `index` makes it, `lowest` raises `OutOfTime(step)`
    once the deadline has passed, and `placed` keeps the offsets given to `add`, in turn."""

    def __init__(self, deadline: Deadline, step: str) -> None:
        self.deadline, self.step = deadline, step
        self.placed: list[int] = []
        self.boxes: Any = None

    def index(self, spans: Sequence[tuple[int, int]], sizes: Sequence[int]) -> Timed:
        self.boxes = box_index(spans, sizes)
        return self

    def lowest(self, numbers: Sequence[int], size: int, fit: str = "lowest") -> int:
        self.deadline.check(self.step)
        return self.boxes.lowest(numbers, size, fit)

    def add(self, numbers: Sequence[int], lo: int) -> None:
        self.boxes.add(numbers, lo)
        self.placed.append(lo)


HEURISTICS = ("greedy-size", "bestfit")


def heuristic_offsets(items: Sequence[Buffer], name: str, deadline: Deadline = NEVER
                      ) -> list[int]:
    """The offsets of heuristic `name` (one of `HEURISTICS`), by index into `items`."""
    if name == "greedy-size":
        return place_in_order(items, size_order(items), deadline=deadline)
    return bestfit_offsets(items, deadline)


def plain_offsets(items: Sequence[Buffer], name: str) -> list[int]:
    """anneal.py's `plain_offsets` (greedy-size, bestfit or GE, by index, run to the end)
    with the engine's structures: the plans a search starts from and never ends above."""
    if name == "ge":
        offsets = ge_offsets(items, 1, True)[0]
        return [offsets[b.id] for b in items]
    return heuristic_offsets(items, name)


def crowded(items: Sequence[Buffer], per_buffer: int = 64) -> bool:
    """More than `per_buffer` buffers alive with each buffer, on average (counted in
    O(n log n)): greedy-size then costs more than bestfit."""
    return overlapping_pairs([(b.start, b.end) for b in items]) > per_buffer * len(items)


def start_plans(items: Sequence[Buffer], names: Sequence[str], deadline: Deadline
                ) -> tuple[list[tuple[str, list[int]]], str]:
    """The plans of the heuristics `names` that finish before `deadline`, listed in the
    order of `names`, and a note ("" when all finished). The cheaper one runs first:
    bestfit when many buffers live together (a long chain), else greedy-size (whose setup
    is only a sort). The first one run always
    comes back: if the deadline cuts it, the buffers it placed keep their offsets and the
    others are stacked above them. A later one that the deadline cuts is left out."""
    plans: dict[str, list[int]] = {}
    note = ""
    dense = len(names) > 1 and crowded(items)
    for name in sorted(names, key=lambda n: (n != "bestfit") == dense):
        try:
            plans[name] = heuristic_offsets(items, name, deadline)
        except OutOfTime as stop:
            if plans:
                note = f"{name} left out: time limit reached"
                break
            placed = sum(1 for o in stop.partial if o >= 0)
            plans[name] = stack_unplaced(items, stop.partial)
            note = (f"time limit reached in {name} after {placed} of {len(items)} buffers; "
                    "the rest stacked above them")
            break
    return [(name, plans[name]) for name in names if name in plans], note
