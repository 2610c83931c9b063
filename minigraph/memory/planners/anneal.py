"""DSA-SA [Imanishi 2024]: simulated annealing over the order of placement.

A plan is *decoded* from an order of the buffers: each, in turn, takes the lowest offset
that is free over its whole lifetime among those placed before it (the greedy placer of
"greedy-size"). The search changes the order - swap two buffers, or move one - decodes,
and keeps the change if the arena shrinks, or with probability exp(-worse / T) if it
grows, T cooling geometrically. It starts from the better of two heuristic plans:
greedy-size's order (largest first), whose decode *is* greedy-size's plan, or bestfit's
plan read as an order by offset, whose decode is no higher anywhere (`offset_order`).
It returns the best plan seen, so it is never worse than the plan it started from.

Only the buffers after the first changed position need decoding again; each one looks at
its time-overlapping neighbours (precomputed), not at every buffer.
"""

from __future__ import annotations

import math
import random
import time
from bisect import bisect_left
from collections.abc import Sequence

from ...errors import PlanError
from ..buffers import Buffer, Placement, theoretical_minimum
from . import register
from .engine.budget import (
    NEVER,
    Deadline,
    OutOfTime,
    check_count,
    check_time_limit,
    positive_finite,
)
from .engine.heuristics import start_plans
from .greedy import lowest_gap, size_order

MAX_MOVES = 10_000_000     # a time-limited run stops here too; more iterations are refused


# Overlap-list entries built per second (measured on this machine, with room to spare).
PAIRS_PER_SECOND = 1_000_000


def overlapping_pairs(buffers: Sequence[Buffer]) -> int:
    """How many pairs of buffers are alive at a common step, counted in O(n log n)."""
    ends = sorted(b.end for b in buffers)
    n = len(buffers)
    return n * (n - 1) // 2 - sum(bisect_left(ends, b.start) for b in buffers)


def overlap_lists(buffers: Sequence[Buffer], deadline: Deadline = NEVER) -> list[list[int]]:
    """For each buffer, the indices of the buffers alive at some common step (a sweep
    over starts; O(n log n + number of overlapping pairs)). Past `deadline`: OutOfTime."""
    order = sorted(range(len(buffers)), key=lambda i: buffers[i].start)
    nbrs: list[list[int]] = [[] for _ in buffers]
    active: list[int] = []
    for i in order:
        deadline.check("overlap lists")
        s = buffers[i].start
        active = [j for j in active if buffers[j].end >= s]
        for j in active:
            nbrs[i].append(j)
            nbrs[j].append(i)
        active.append(i)
    return nbrs


@register("anneal")
def plan_anneal(buffers: Sequence[Buffer], *, seed: int = 0, iterations: int | None = None,
                time_limit: float | None = None, start: str = "best",
                t_start: float = 0.005, t_end: float = 0.0002) -> Placement:
    """Simulated annealing over the placement order (DSA-SA).

    `iterations` (default 1000 when no `time_limit` is given; at most `MAX_MOVES`) bounds
    the moves and makes the result a function of `seed`; `time_limit` (seconds) bounds
    the whole call, the starting plan included. `start`: the first order, "greedy-size"
    (largest first), "bestfit", or "best" (the better of the two). Temperatures are
    fractions of the starting arena, cooling from `t_start` to `t_end`. Half the moves
    take a buffer that reaches the top of the arena and place it earlier in the order;
    the others swap two buffers or move one, at random.
    """
    check_anneal_options(iterations, time_limit, start, t_start, t_end)
    deadline = Deadline.after(time_limit)
    if iterations is None and time_limit is None:
        iterations = 1000
    items = [b for b in buffers if b.size]
    offsets = {b.id: 0 for b in buffers}
    if not items:
        return Placement.of(buffers, offsets, "anneal: nothing to place")
    lower = theoretical_minimum(items)
    perm, start_name, start_off, cut = _start_order(items, start, deadline, lower)
    try:
        if cut:
            raise OutOfTime(cut + ": the time limit was reached before the search")
        if max(o + b.size for o, b in zip(start_off, items)) <= lower:
            raise OutOfTime("optimal: it meets the theoretical minimum")
        entries = 2 * overlapping_pairs(items)
        if time_limit is not None and entries > PAIRS_PER_SECOND * deadline.left() / 2:
            raise OutOfTime(f"its overlap lists would hold {entries:,} entries, more than "
                            f"{deadline.left():.1f} s left allow")
        order = Decoding(items, perm, deadline)
        start_arena = order.decode(0, deadline)
    except OutOfTime as stop:
        offsets.update((b.id, o) for b, o in zip(items, start_off))
        return Placement.of(buffers, offsets, f"anneal: 0 moves, {start_name}'s plan "
                            f"({stop.step})")
    best_off, best, gain, k, accepted = _anneal(order, start_arena, seed, iterations,
                                                time_limit, deadline, t_start, t_end)
    for b, o in zip(items, best_off):
        offsets[b.id] = o
    return Placement.of(buffers, offsets, f"anneal: {k} moves, {accepted} accepted, "
                        f"{start_arena} -> {best} B ({gain:.1f}% below {start_name})")


def check_anneal_options(iterations: int | None, time_limit: float | None, start: str,
                         t_start: float, t_end: float) -> None:
    """Refuse options that would never stop or mean nothing: a NaN, infinite or
    non-positive time limit, iterations that are not a count, temperatures that are not
    positive numbers cooling down (t_start >= t_end > 0)."""
    if iterations is not None:
        check_count("anneal", "iterations", iterations, most=MAX_MOVES)
    check_time_limit("anneal", time_limit, optional=True)
    if not isinstance(start, str) or start not in STARTS:
        raise PlanError(f"anneal: start must be one of {', '.join(STARTS)}, not {start!r}")
    for name, t in (("t_start", t_start), ("t_end", t_end)):
        if not positive_finite(t):
            raise PlanError(f"anneal: {name} must be a positive, finite fraction of the "
                            f"arena, not {t!r}")
    if t_end > t_start:
        raise PlanError(f"anneal: t_end ({t_end!r}) must not exceed t_start ({t_start!r}): "
                        "the temperature cools")


def _anneal(order: Decoding, start_arena: int, seed: int, iterations: int | None,
            time_limit: float | None, deadline: Deadline, t_start: float, t_end: float
            ) -> tuple[list[int], int, float, int, int]:
    """The annealing loop from the decoded start: (best offsets, best arena, gain in %,
    moves, moves accepted)."""
    cur = best = start_arena
    best_off = order.off[:]
    rng = random.Random(seed)
    limit = None if time_limit is None else deadline.left()    # what the start left
    t0 = time.perf_counter()
    k, accepted = 0, 0
    while order.n > 1 and k < MAX_MOVES:
        temp = _temperature(k, iterations, limit, time.perf_counter() - t0, t_start, t_end)
        if temp is None:
            break
        k += 1
        a, b, swap = _propose(rng, order, cur)
        if a == b:
            continue
        a, b = min(a, b), max(a, b)
        saved = order.change(a, b, swap)
        try:
            new = order.decode(a, deadline)
        except OutOfTime:               # this move is not finished: take it back, stop
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
    gain = 100.0 * (start_arena - best) / start_arena
    return best_off, best, gain, k, accepted


class Decoding:
    """A placement order `perm` and its decoded offsets `off` (by index into `items`).

    `top[q]` is the arena of the first q buffers of the order, so after a change at
    position p only the buffers from p on are decoded again; each looks only at its
    time-overlapping neighbours (precomputed), not at every buffer.
    """

    def __init__(self, items: Sequence[Buffer], perm: list[int], deadline: Deadline = NEVER):
        self.n = len(items)
        self.size = [b.size for b in items]
        self.nbrs = overlap_lists(items, deadline)
        self.perm = perm
        self.pos = [0] * self.n          # pos[i]: where buffer i stands in perm
        for q, i in enumerate(perm):
            self.pos[i] = q
        self.off = [0] * self.n
        self.top = [0] * (self.n + 1)

    def decode(self, p: int, deadline: Deadline = NEVER) -> int:
        """Place the buffers of positions p.. in turn, each at the lowest gap among the
        neighbours placed before it; the arena. Past `deadline`: OutOfTime, the offsets
        from p on half decoded (`undo` restores them)."""
        perm, pos, off, size, top = self.perm, self.pos, self.off, self.size, self.top
        for q in range(p, self.n):
            if not q & 63:
                deadline.check("decoding")
            i = perm[q]
            taken = [(off[j], off[j] + size[j]) for j in self.nbrs[i] if pos[j] < q]
            o = lowest_gap(taken, size[i])
            off[i] = o
            t = o + size[i]
            top[q + 1] = t if t > top[q] else top[q]
        return top[self.n]

    def at_top(self, arena: int) -> list[int]:
        """The positions of the buffers that reach the top of the arena."""
        return [q for q in range(self.n) if self.off[self.perm[q]] + self.size[self.perm[q]]
                == arena]

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


def _temperature(k: int, iterations: int | None, time_limit: float | None, elapsed: float,
                 t_start: float, t_end: float) -> float | None:
    """The temperature of move k, cooling geometrically from `t_start` to `t_end` over the
    iterations (or the time limit); None once the budget is spent."""
    if iterations is not None and k >= iterations:
        return None
    if time_limit is not None and elapsed >= time_limit:
        return None
    frac = k / iterations if iterations else elapsed / time_limit
    return t_start * (t_end / t_start) ** min(frac, 1.0)


def _propose(rng: random.Random, order: Decoding, arena: int) -> tuple[int, int, bool]:
    """A move (a, b, swap): half the time a buffer that reaches the top moves earlier in
    the order; else two random positions swap, or one buffer moves."""
    if rng.random() < 0.5:
        b = rng.choice(order.at_top(arena))
        return rng.randrange(b + 1), b, False
    a, b = rng.randrange(order.n), rng.randrange(order.n)
    return a, b, rng.random() < 0.5


STARTS = ("best", "greedy-size", "bestfit")


def offset_order(items: Sequence[Buffer], offsets: Sequence[int]) -> list[int]:
    """The order that decodes to a plan at least as good as `offsets`: lowest first.

    Placed in that order, each buffer finds its old bytes free (everything placed before
    it that overlaps it in time lay below it, and now lies no higher), so the lowest gap
    is at or below its old offset.
    """
    return sorted(range(len(items)), key=lambda i: (offsets[i], -items[i].size, i))


def _start_order(items: Sequence[Buffer], start: str, deadline: Deadline, lower: int
                 ) -> tuple[list[int], str, list[int], str]:
    """The first order, its heuristic's name and plan, and what the deadline cut ("" when
    nothing). With "best", the better of greedy-size and bestfit (greedy-size on ties);
    bestfit runs first, and greedy-size not at all when bestfit meets `lower` or less
    than twice bestfit's time is left."""
    names = {"greedy-size": ["greedy-size"], "bestfit": ["bestfit"]}.get(start, ["bestfit"])
    took = time.perf_counter()
    plans, cut = start_plans(items, names, deadline)
    took = time.perf_counter() - took
    arena = {name: max(o + b.size for o, b in zip(off, items)) for name, off in plans}
    if start == "best" and not cut and arena["bestfit"] > lower and \
            deadline.left() > 2 * took:     # greedy-size costs about what bestfit did
        more, cut = start_plans(items, ["greedy-size"], deadline)
        if not cut:
            plans = more + plans
            arena["greedy-size"] = max(o + b.size for o, b in zip(more[0][1], items))
        cut = ""                        # greedy-size cut short: bestfit's plan stands
    name, off = min(plans, key=lambda p: arena[p[0]])     # the first on ties
    if name == "greedy-size" and not cut:
        return size_order(items), name, off, cut
    return offset_order(items, off), name, off, cut
