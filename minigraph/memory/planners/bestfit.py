"""Best fit: Chainer-Opt's skyline heuristic [Sekiyama 2018, fig. 1].

Greedy by size (greedy.py) fixes an order first and then finds room for each buffer. Best
fit works the other way round: it looks at the free room first and picks the buffer that
suits it best. The room is a *skyline*: a list of "offset lines" over the time axis, each
the top of what is placed below it over a run of steps. Repeat until all are placed:

1. take the lowest line (the leftmost on ties);
2. among the unplaced buffers whose lifetime lies within the line's steps, put the
   longest-lived one (the larger first on ties, then the earlier) on the line, which
   splits it in up to three: the steps before the buffer, its top, the steps after it;
3. if none fits, raise the line to its lower neighbour and merge the two (and every
   neighbour of that height: two lines side by side never share a height).

A round places a buffer (adding at most two lines) or removes a line: at most 3n + 1.

Here the skyline is a plain list of lines and the unplaced buffers a list read from the
best down each round (`Skyline`, `Unplaced`): O(n) a round. This is "bestfit:textbook";
the registry's "bestfit" runs `bestfit_offsets` with the two made fast
(`engine/skyline.py`: a heap, a segment tree) and a deadline: the same offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...errors import PlanError
from ..buffers import Buffer, Placement
from . import register


class Skyline:
    """The offset lines, left to right: `lines[k]` is [t0, t1, h], steps t0..t1 at
    height h. At first one line over all time, at offset 0."""

    def __init__(self, t0: int, t1: int) -> None:
        self.lines = [[t0, t1, 0]]

    def lowest(self) -> tuple[int, int, int, int]:
        """The lowest line, leftmost on ties: (its number k, t0, t1, h)."""
        k = min(range(len(self.lines)), key=lambda k: (self.lines[k][2], k))
        return (k, *self.lines[k])

    def place(self, k: int, start: int, end: int, size: int) -> None:
        """Put a buffer (steps start..end, size bytes) on line k: the line splits into the
        part before it, its top, and the part after it."""
        t0, t1, h = self.lines[k]
        before = [[t0, start - 1, h]] if start > t0 else []
        after = [[end + 1, t1, h]] if end < t1 else []
        self.lines[k:k + 1] = before + [[start, end, h + size]] + after
        self._merge(k + len(before))            # the top may meet a neighbour's height

    def lift(self, k: int) -> None:
        """Nothing fits on line k: raise it to its lower neighbour and merge them."""
        heights = [self.lines[j][2] for j in (k - 1, k + 1) if 0 <= j < len(self.lines)]
        if not heights:     # one line over all time and nothing fits: cannot happen
            raise PlanError("bestfit: no buffer fits under the only offset line")
        self.lines[k][2] = min(heights)
        self._merge(k)

    def _merge(self, k: int) -> None:
        """Line k takes in its neighbours of its own height: one line."""
        lines = self.lines
        if k + 1 < len(lines) and lines[k + 1][2] == lines[k][2]:
            lines[k][1] = lines[k + 1][1]
            del lines[k + 1]
        if k > 0 and lines[k - 1][2] == lines[k][2]:
            lines[k - 1][1] = lines[k][1]
            del lines[k]


class Unplaced:
    """The buffers not placed yet, best first: the longest-lived, then the larger, then the
    earlier start, then the earlier in the list. `offsets` (by index into the buffers)
    fills in as they are placed: -1 until then; 0 for a buffer of 0 bytes, never placed."""

    def __init__(self, buffers: Sequence[Buffer]) -> None:
        self.buffers = buffers
        self.offsets = [-1 if b.size else 0 for b in buffers]
        self.best_first = sorted((i for i, b in enumerate(buffers) if b.size),
                                 key=lambda i: (buffers[i].start - buffers[i].end,
                                                -buffers[i].size, buffers[i].start, i))

    def find(self, t0: int, t1: int) -> int:
        """The best unplaced buffer whose lifetime lies within steps t0..t1 (-1: none)."""
        for i in self.best_first:
            if t0 <= self.buffers[i].start and self.buffers[i].end <= t1:
                return i
        return -1

    def place(self, i: int, offset: int) -> None:
        """Buffer i goes at `offset`: it is no longer a candidate."""
        self.offsets[i] = offset
        self.best_first.remove(i)


def bestfit_offsets(buffers: Sequence[Buffer], skyline: Callable[..., Any] = Skyline,
                    unplaced: Callable[..., Any] = Unplaced) -> list[int]:
    """Best fit's offsets, by index into `buffers`. `skyline(first step, last step)` and
    `unplaced(buffers)` make the two structures (the engine passes its fast ones)."""
    sized = [b for b in buffers if b.size]
    if not sized:
        return [0] * len(buffers)
    sky = skyline(min(b.start for b in sized), max(b.end for b in sized))
    pool, left = unplaced(buffers), len(sized)
    while left:
        line, t0, t1, height = sky.lowest()
        i = pool.find(t0, t1)
        if i < 0:                       # nothing fits under this line: raise it
            sky.lift(line)
            continue
        pool.place(i, height)
        sky.place(line, buffers[i].start, buffers[i].end, buffers[i].size)
        left -= 1
    return pool.offsets


@register("bestfit:textbook")
def plan_bestfit(buffers: Sequence[Buffer]) -> Placement:
    """Chainer-Opt's best fit [Sekiyama 2018, fig. 1]: on the lowest offset line, the
    longest-lived buffer that fits under it; if none, raise the line (see above)."""
    offsets = bestfit_offsets(buffers)
    return Placement.of(buffers, {b.id: o for b, o in zip(buffers, offsets)})
