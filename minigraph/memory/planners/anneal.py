"""DSA-SA [Imanishi 2024]: simulated annealing over the order of placement.

A plan is *decoded* from an order of the buffers: each, in turn, takes the lowest offset
that is free over its whole lifetime among those placed before it (the greedy placer of
"greedy-size"). The search changes the order - swap two buffers, or move one - decodes,
and keeps the change if the arena shrinks, or with probability exp(-worse / T) if it
grows, T cooling geometrically. Read in this order:

1. `overlap_lists`: for each buffer, the buffers alive at a common step with it; a
   decode looks only at those, not at every buffer.
2. `Decoding`: an order and its decoded offsets. After a change at position p only the
   buffers from p on are decoded again.
3. `start_order`: the first order, the best of three heuristic plans: greedy-size's order
   (largest first), whose decode *is* greedy-size's plan, or bestfit's or GE's plan read
   as an order by offset, whose decode is no higher anywhere (`offset_order`).
4. `anneal`: the loop. It returns the best plan seen, so never one worse than its start.

This is "anneal:textbook", `iterations` moves and nothing else. The registry's "anneal"
(`engine/anneal.py`) runs this loop with a time limit (`stop`, `progress`) from the
engine's fast heuristics; with no time limit, the same plan.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Callable, Sequence
from numbers import Real

from ...errors import PlanError
from ..buffers import Buffer, Placement, theoretical_minimum
from . import register
from .bestfit import bestfit_offsets
from .ge import ge_offsets
from .greedy import lowest_gap, place_in_order, size_order

MAX_MOVES = 10_000_000     # more iterations are refused
STARTS = ("best", "greedy-size", "bestfit")


def never() -> bool:
    """The `stop` of a run that only counts moves: it never stops early."""
    return False


def overlapping_pairs(buffers: Sequence[Buffer]) -> int:
    """How many pairs of buffers are alive at a common step, counted in O(n log n)."""
    ends = sorted(b.end for b in buffers)
    n = len(buffers)
    return n * (n - 1) // 2 - sum(bisect_left(ends, b.start) for b in buffers)


def overlap_lists(buffers: Sequence[Buffer], stop: Callable[[], bool] = never
                  ) -> list[list[int]] | None:
    """For each buffer, the indices of the buffers alive at some common step (a sweep
    over starts; O(n log n + number of overlapping pairs)). None once `stop()` says so."""
    order = sorted(range(len(buffers)), key=lambda i: buffers[i].start)
    nbrs: list[list[int]] = [[] for _ in buffers]
    active: list[int] = []
    for i in order:
        if stop():
            return None
        s = buffers[i].start
        active = [j for j in active if buffers[j].end >= s]
        for j in active:
            nbrs[i].append(j)
            nbrs[j].append(i)
        active.append(i)
    return nbrs


class Decoding:
    """A placement order `perm` and its decoded offsets `off` (by index into `items`);
    `top[q]` is the arena of the first q buffers of the order."""

    def __init__(self, items: Sequence[Buffer], perm: list[int], nbrs: list[list[int]]):
        self.n = len(items)
        self.size = [b.size for b in items]
        self.nbrs = nbrs
        self.perm = perm
        self.pos = [0] * self.n          # pos[i]: where buffer i stands in perm
        for q, i in enumerate(perm):
            self.pos[i] = q
        self.off = [0] * self.n
        self.top = [0] * (self.n + 1)

    def decode(self, p: int, stop: Callable[[], bool] = never) -> int | None:
        """Place the buffers of positions p.. in turn, each at the lowest gap among the
        neighbours placed before it; the arena. None when `stop()` (asked every 64
        buffers) cuts it, the offsets from p on half decoded (`undo` restores them)."""
        perm, pos, off, size, top = self.perm, self.pos, self.off, self.size, self.top
        for q in range(p, self.n):
            if not q & 63 and stop():
                return None
            i = perm[q]
            taken = [(off[j], off[j] + size[j]) for j in self.nbrs[i] if pos[j] < q]
            o = lowest_gap(taken, size[i])
            off[i] = o
            top[q + 1] = max(top[q], o + size[i])
        return top[self.n]

    def at_top(self, arena: int) -> list[int]:
        """The positions of the buffers that reach the top of the arena."""
        return [q for q, i in enumerate(self.perm) if self.off[i] + self.size[i] == arena]

    def change(self, a: int, b: int, swap: bool) -> tuple[list[int], list[int], list[int]]:
        """Swap positions a < b, or move the buffer at b to a; what `undo` needs."""
        perm, off = self.perm, self.off
        saved_perm = perm[a:b + 1]
        saved_off = [off[i] for i in saved_perm] + [off[perm[q]] for q in range(b + 1, self.n)]
        saved_top = self.top[a + 1:]
        if swap:
            perm[a], perm[b] = perm[b], perm[a]
        else:
            perm[a:b + 1] = [perm[b]] + perm[a:b]
        for q in range(a, b + 1):
            self.pos[perm[q]] = q
        return saved_perm, saved_off, saved_top

    def undo(self, a: int, b: int, saved: tuple[list[int], list[int], list[int]]) -> None:
        """Restore the order and the offsets from before `change(a, b, ...)`."""
        saved_perm, saved_off, saved_top = saved
        perm = self.perm
        perm[a:b + 1] = saved_perm
        for q in range(a, b + 1):
            self.pos[perm[q]] = q
        for i, o in zip(perm[a:], saved_off):
            self.off[i] = o
        self.top[a + 1:] = saved_top


def offset_order(items: Sequence[Buffer], offsets: Sequence[int]) -> list[int]:
    """The order that decodes to a plan at least as good as `offsets`: lowest first.
    Placed in that order, each buffer finds its old bytes free (what was placed before it
    and overlaps it in time lay below it, and now lies no higher)."""
    return sorted(range(len(items)), key=lambda i: (offsets[i], -items[i].size, i))


def start_order(items: Sequence[Buffer], plans: Sequence[tuple[str, list[int]]]
                ) -> tuple[list[int], str, list[int]]:
    """The order to start from, the heuristic it came from and its plan: the smallest of
    `plans` ((name, offsets by index)), the first on ties. Greedy-size's plan is its
    size order decoded; any other plan is read as an order by offset."""
    name, off = min(plans, key=lambda p: max(o + b.size for o, b in zip(p[1], items)))
    return (size_order(items) if name == "greedy-size" else offset_order(items, off)), \
        name, off


def plain_offsets(items: Sequence[Buffer], name: str) -> list[int]:
    """The offsets (by index) of the plain heuristic `name`: greedy-size, bestfit or GE."""
    if name == "greedy-size":
        return place_in_order(items, size_order(items))
    if name == "bestfit":
        return bestfit_offsets(items)
    offsets = ge_offsets(items, 1, True)[0]
    return [offsets[b.id] for b in items]


def heuristic_plans(items: Sequence[Buffer], start: str,
                    run: Callable[[Sequence[Buffer], str], list[int]] = plain_offsets
                    ) -> list[tuple[str, list[int]]]:
    """The plans `start` names, each `run` to its end: "best" takes bestfit's and, when
    that is above the theoretical minimum, greedy-size's (first: it wins ties) and GE's."""
    if start == "greedy-size":
        return [("greedy-size", run(items, "greedy-size"))]
    plans = [("bestfit", run(items, "bestfit"))]
    if start == "best" and max(o + b.size for o, b in zip(plans[0][1], items)) > \
            theoretical_minimum(items):
        plans = [("greedy-size", run(items, "greedy-size")), *plans, ("ge", run(items, "ge"))]
    return plans


def anneal(order: Decoding, start_arena: int, seed: int, progress: Callable[[int], float | None],
           t_start: float, t_end: float, stop: Callable[[], bool] = never
           ) -> tuple[list[int], int, int, int]:
    """The annealing loop from the decoded start: (best offsets, best arena, moves, moves
    accepted). `progress(k)` is the fraction of the budget spent before move k (None: it
    is spent), so the temperature cools from `t_start` to `t_end` (fractions of the start
    arena). Half the moves take a buffer that reaches the top of the arena and place it
    earlier in the order; the others swap two buffers or move one, at random."""
    cur = best = start_arena
    best_off = order.off[:]
    rng = random.Random(seed)
    k, accepted = 0, 0
    while order.n > 1:
        frac = progress(k)
        if frac is None:
            break
        temp = t_start * (t_end / t_start) ** min(frac, 1.0)
        k += 1
        if rng.random() < 0.5:                     # a buffer at the top moves earlier
            b = rng.choice(order.at_top(cur))
            a, b, swap = rng.randrange(b + 1), b, False
        else:                                      # two swap, or one moves
            a, b = rng.randrange(order.n), rng.randrange(order.n)
            swap = rng.random() < 0.5
        if a == b:
            continue
        a, b = min(a, b), max(a, b)
        saved = order.change(a, b, swap)
        new = order.decode(a, stop)
        if new is None:                  # this move is not finished: take it back, stop
            order.undo(a, b, saved)
            break
        delta = (new - cur) / start_arena
        if delta <= 0 or rng.random() < math.exp(-delta / temp):
            cur = new
            accepted += 1
            if new < best:
                best, best_off = new, order.off[:]
        else:
            order.undo(a, b, saved)
    return best_off, best, k, accepted


def check_anneal_options(iterations: object, start: object, t_start: object,
                         t_end: object, *, optional: bool = False) -> None:
    """Refuse options that mean nothing: iterations that are not a count (at most
    `MAX_MOVES`; None passes when `optional`), an unknown start, temperatures that are
    not positive numbers cooling down (t_start >= t_end > 0)."""
    count = isinstance(iterations, int) and not isinstance(iterations, bool)
    if not (iterations is None and optional) and not (count and 0 <= iterations <= MAX_MOVES):
        raise PlanError(f"anneal: iterations must be an integer >= 0 and at most "
                        f"{MAX_MOVES:,}, not {iterations!r}")
    if not isinstance(start, str) or start not in STARTS:
        raise PlanError(f"anneal: start must be one of {', '.join(STARTS)}, not {start!r}")
    for name, t in (("t_start", t_start), ("t_end", t_end)):
        if not (isinstance(t, Real) and not isinstance(t, bool) and math.isfinite(t) and t > 0):
            raise PlanError(f"anneal: {name} must be a positive, finite fraction of the "
                            f"arena, not {t!r}")
    if t_end > t_start:
        raise PlanError(f"anneal: t_end ({t_end!r}) must not exceed t_start ({t_start!r}): "
                        "the temperature cools")


@register("anneal:textbook")
def plan_anneal(buffers: Sequence[Buffer], *, seed: int = 0, iterations: int = 1000,
                start: str = "best", t_start: float = 0.005, t_end: float = 0.0002
                ) -> Placement:
    """DSA-SA: `iterations` moves from the order `start` names ("greedy-size", "bestfit",
    or "best": `heuristic_plans`), a function of `seed`, never above its start."""
    check_anneal_options(iterations, start, t_start, t_end)
    items = [b for b in buffers if b.size]
    offsets = {b.id: 0 for b in buffers}
    if not items:
        return Placement.of(buffers, offsets, "anneal: nothing to place")
    perm, name, start_off = start_order(items, heuristic_plans(items, start))
    if max(o + b.size for o, b in zip(start_off, items)) <= theoretical_minimum(items):
        offsets.update((b.id, o) for b, o in zip(items, start_off))
        return Placement.of(buffers, offsets, f"anneal: 0 moves, {name}'s plan (optimal: "
                            "it meets the theoretical minimum)")
    order = Decoding(items, perm, overlap_lists(items))
    start_arena = order.decode(0)
    best_off, best, k, accepted = anneal(order, start_arena, seed,
                                         lambda k: k / iterations if k < iterations else None,
                                         t_start, t_end)
    offsets.update((b.id, o) for b, o in zip(items, best_off))
    gain = 100.0 * (start_arena - best) / start_arena
    return Placement.of(buffers, offsets, f"anneal: {k} moves, {accepted} accepted, "
                        f"{start_arena} -> {best} B ({gain:.1f}% below {name}'s plan; "
                        "no bound proved)")
