"""DSA-SA (seed 002, paper 6): simulated annealing over the order of placement.

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
from collections.abc import Sequence

from ...errors import PlanError
from ..buffers import Buffer, Placement
from . import register
from .offset import lowest_gap, place_in_order, plan_bestfit, size_order


def overlap_lists(buffers: Sequence[Buffer]) -> list[list[int]]:
    """For each buffer, the indices of the buffers alive at some common step (a sweep
    over starts; O(n log n + number of overlapping pairs))."""
    order = sorted(range(len(buffers)), key=lambda i: buffers[i].start)
    nbrs: list[list[int]] = [[] for _ in buffers]
    active: list[int] = []
    for i in order:
        s = buffers[i].start
        active = [j for j in active if buffers[j].end >= s]
        for j in active:
            nbrs[i].append(j)
            nbrs[j].append(i)
        active.append(i)
    return nbrs


@register("anneal")
def plan_anneal(buffers: Sequence[Buffer], seed: int = 0, iterations: int | None = None,
                time_limit: float | None = None, start: str = "best",
                t_start: float = 0.005, t_end: float = 0.0002) -> Placement:
    """Simulated annealing over the placement order (DSA-SA).

    `iterations` (default 1000 when no `time_limit` is given) bounds the moves and makes
    the result a function of `seed`; `time_limit` (seconds) stops earlier. `start`: the
    first order, "greedy-size" (largest first), "bestfit", or "best" (the better of the
    two). Temperatures are fractions of the starting arena, cooling from `t_start` to
    `t_end`. Half the moves take a buffer that reaches the top of the arena and place it
    earlier in the order; the others swap two buffers or move one, at random.
    """
    if iterations is None and time_limit is None:
        iterations = 1000
    if iterations is not None and iterations < 0:
        raise PlanError(f"anneal: iterations must be >= 0, not {iterations}")
    items = [b for b in buffers if b.size]
    offsets_out = {b.id: 0 for b in buffers}
    n = len(items)
    if n == 0:
        return Placement(offsets_out, "anneal: nothing to place")
    size = [b.size for b in items]
    nbrs = overlap_lists(items)
    if start not in STARTS:
        raise PlanError(f"anneal: start must be one of {', '.join(STARTS)}, not {start!r}")
    perm, start_name = _start_order(items, start)
    pos = [0] * n
    for q, i in enumerate(perm):
        pos[i] = q
    off = [0] * n
    top = [0] * (n + 1)          # top[q]: the arena of the first q buffers of perm

    def decode(p: int) -> int:
        for q in range(p, n):
            i = perm[q]
            taken = [(off[j], off[j] + size[j]) for j in nbrs[i] if pos[j] < q]
            o = lowest_gap(taken, size[i])
            off[i] = o
            t = o + size[i]
            top[q + 1] = t if t > top[q] else top[q]
        return top[n]

    start_arena = cur = decode(0)
    best, best_off = cur, off[:]
    rng = random.Random(seed)
    t0 = time.perf_counter()
    k, accepted = 0, 0
    while n > 1:
        if iterations is not None and k >= iterations:
            break
        elapsed = time.perf_counter() - t0
        if time_limit is not None and elapsed >= time_limit:
            break
        frac = k / iterations if iterations else elapsed / time_limit
        temp = t_start * (t_end / t_start) ** min(frac, 1.0)
        k += 1
        if rng.random() < 0.5:       # move a buffer that reaches the top earlier
            peak = [q for q in range(n) if off[perm[q]] + size[perm[q]] == cur]
            b = rng.choice(peak)
            a = rng.randrange(b + 1)
            swap = False
        else:                        # swap two buffers, or move one, at random
            a, b = rng.randrange(n), rng.randrange(n)
            swap = rng.random() < 0.5
        if a == b:
            continue
        a, b = min(a, b), max(a, b)
        saved_perm = perm[a:b + 1]
        saved_off = [off[i] for i in saved_perm] + [off[perm[q]] for q in range(b + 1, n)]
        saved_top = top[a + 1:]
        if swap:
            perm[a], perm[b] = perm[b], perm[a]
        else:                    # move the buffer at b to position a
            perm[a:b + 1] = [perm[b]] + perm[a:b]
        for q in range(a, b + 1):
            pos[perm[q]] = q
        new = decode(a)
        delta = (new - cur) / start_arena
        if delta <= 0 or rng.random() < math.exp(-delta / temp):
            cur = new
            accepted += 1
            if new < best:
                best, best_off = new, off[:]
            continue
        perm[a:b + 1] = saved_perm           # undo
        for q in range(a, b + 1):
            pos[perm[q]] = q
        rest = perm[a:]
        for i, o in zip(rest, saved_off):
            off[i] = o
        top[a + 1:] = saved_top
    for b, o in zip(items, best_off):
        offsets_out[b.id] = o
    gain = 100.0 * (start_arena - best) / start_arena
    return Placement(offsets_out, f"anneal: {k} moves, {accepted} accepted, "
                     f"{start_arena} -> {best} B ({gain:.1f}% below {start_name})")


STARTS = ("best", "greedy-size", "bestfit")


def offset_order(items: Sequence[Buffer], offsets: Sequence[int]) -> list[int]:
    """The order that decodes to a plan at least as good as `offsets`: lowest first.

    Placed in that order, each buffer finds its old bytes free (everything placed before
    it that overlaps it in time lay below it, and now lies no higher), so the lowest gap
    is at or below its old offset.
    """
    return sorted(range(len(items)), key=lambda i: (offsets[i], -items[i].size, i))


def _start_order(items: Sequence[Buffer], start: str) -> tuple[list[int], str]:
    greedy = size_order(items)
    if start == "greedy-size":
        return greedy, "greedy-size"
    placed = plan_bestfit(items).offsets
    by_fit = offset_order(items, [placed[b.id] for b in items])
    if start == "bestfit":
        return by_fit, "bestfit"
    g_arena = max(o + b.size for o, b in zip(place_in_order(items, greedy), items))
    f_arena = max(placed[b.id] + b.size for b in items)
    return (greedy, "greedy-size") if g_arena <= f_arena else (by_fit, "bestfit")
