"""Greedy by size [Pisarchyk 2020]: largest buffer first, each at the lowest offset that is
free over its whole lifetime.

In Chainer-Opt's picture (buffers.py) a buffer is a box whose steps are fixed; a planner
chooses its height, the offset. Greedy by size is TFLite's arena planner and XLA's
`GlobalDecreasingSizeBestFitHeap`, built from three pieces, read in this order:

1. `lowest_gap`: given the byte ranges taken by the boxes in the way, the lowest gap that
   fits (*first fit*), or with `fit="best"` the smallest gap that fits (*best fit*).
2. `PlacedBoxes`: the boxes placed so far. "The lowest offset free at these steps" reads
   every placed box, keeps those alive at one of the steps, and asks `lowest_gap`.
3. `place_in_order`: each buffer of an order in turn, at `lowest_gap` of the boxes in its
   way; `plan_greedy_size` gives it the order largest first (`size_order`).

GE's level 2 (ge.py) asks `PlacedBoxes` the same question, and annealing (anneal.py)
decodes its orders with `lowest_gap`.

This is "greedy-size:textbook"; the registry's "greedy-size" runs `place_in_order` with a
faster `PlacedBoxes` (`engine/boxes.py`) and a deadline: the same offsets, sooner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from ...errors import PlanError
from ..buffers import Buffer, Placement
from . import register


def lowest_gap(taken: list[tuple[int, int]], size: int, fit: str = "lowest") -> int:
    """The offset for `size` bytes among the byte ranges `taken`: the lowest gap that
    fits (`fit="lowest"`, first fit), or the smallest such gap (`fit="best"`, the lowest
    of those on ties); the top of the highest range when no gap fits."""
    taken.sort(key=itemgetter(0))   # by lo alone: ties cannot change the answer, and ints
    top = 0                         # compare several times faster than tuples
    if fit == "lowest":
        for lo, hi in taken:
            if lo - top >= size:
                return top
            if hi > top:
                top = hi
        return top
    best, best_gap = None, None
    for lo, hi in taken:
        gap = lo - top
        if gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = top, gap
        if hi > top:
            top = hi
    return top if best is None else best


class PlacedBoxes:
    """The boxes placed so far, in a plain list, read whole for each question.

    A box is named by its number in `spans`, the lifetimes of all the boxes to come (sizes
    `sizes`: the engine's indexes lay out their tables once). A GE block is several boxes
    at one offset, so both methods take a few numbers at once."""

    def __init__(self, spans: Sequence[tuple[int, int]], sizes: Sequence[int]) -> None:
        self.spans, self.sizes = spans, sizes
        self.placed: list[tuple[int, int, int, int]] = []     # (start, end, lo, hi)

    def add(self, numbers: Sequence[int], lo: int) -> None:
        """Place the boxes `numbers` at offset `lo`."""
        for k in numbers:
            self.placed.append((*self.spans[k], lo, lo + self.sizes[k]))

    def lowest(self, numbers: Sequence[int], size: int, fit: str = "lowest") -> int:
        """The offset for `size` bytes free at every step of the boxes `numbers`:
        `lowest_gap` of the placed boxes alive at one of those steps."""
        taken = []
        for k in numbers:
            a, b = self.spans[k]
            taken += [(lo, hi) for s, e, lo, hi in self.placed if s <= b and a <= e]
        return lowest_gap(taken, size, fit)


def place_in_order(buffers: Sequence[Buffer], order: Sequence[int], fit: str = "lowest",
                   index: Callable[..., Any] = PlacedBoxes) -> list[int]:
    """Offsets (by index into `buffers`) when each buffer in `order` takes the lowest (or
    best) gap free over its whole lifetime among those placed before it. `index` keeps
    the placed boxes: anything made from (spans, sizes) with `add` and `lowest`."""
    if fit not in ("lowest", "best"):
        raise PlanError(f"fit must be 'lowest' or 'best', not {fit!r}")
    queue = [i for i in order if buffers[i].size]         # box k: the k-th one placed
    sizes = [buffers[i].size for i in queue]
    boxes = index([(buffers[i].start, buffers[i].end) for i in queue], sizes)
    offsets = [0] * len(buffers)                          # a buffer of 0 bytes: offset 0
    for k, i in enumerate(queue):
        offsets[i] = boxes.lowest((k,), sizes[k], fit)
        boxes.add((k,), offsets[i])
    return offsets


def size_order(buffers: Sequence[Buffer]) -> list[int]:
    """Largest first; among equal sizes the longer-lived first, then the earlier."""
    return sorted(range(len(buffers)), key=lambda i: (-buffers[i].size,
                                                      buffers[i].start - buffers[i].end,
                                                      buffers[i].start, i))


@register("greedy-size:textbook")
def plan_greedy_size(buffers: Sequence[Buffer], *, fit: str = "lowest") -> Placement:
    """Decreasing size, each buffer at the lowest offset free for its whole lifetime
    (TFLite's greedy-by-size [Pisarchyk 2020], XLA's decreasing-size heap; `fit="best"`
    takes the smallest gap that fits instead of the lowest)."""
    offsets = place_in_order(buffers, size_order(buffers), fit)
    return Placement.of(buffers, {b.id: off for b, off in zip(buffers, offsets)})
