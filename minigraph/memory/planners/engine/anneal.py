"""The registry's "anneal": anneal.py's loop [Imanishi 2024] with a time limit.

anneal.py is the textbook ("anneal:textbook"): `iterations` moves from the better of two
heuristic plans. This wrapper changes only what bounds the work, never a move:

- `time_limit` (seconds) bounds the annealing: the overlap lists and each decode stop at
  the deadline, and a move the deadline cuts is taken back. The start plans (bestfit,
  greedy-size, GE, the engine's fast versions) always run to their end, so the plan is
  never above the best of them, at any size and any limit;
- with a time limit, overlap lists too large for the time left are not built (the start
  plan is returned, and the note says why);
- without `iterations`, the temperature cools over the time limit instead of the moves.

With `time_limit=None` it returns the textbook's plan (tests/test_planner_tiers.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...buffers import Buffer, Placement, theoretical_minimum
from ...clock import now
from .. import register
from ..anneal import (
    MAX_MOVES,
    Decoding,
    anneal,
    check_anneal_options,
    heuristic_plans,
    overlap_lists,
    overlapping_pairs,
    start_order,
)
from .budget import NEVER, Deadline, OutOfTime, check_time_limit
from .heuristics import plain_offsets

# Overlap-list entries built per second, a conservative rate (a slow machine builds them
# several times faster), to refuse lists the time left cannot hold.
PAIRS_PER_SECOND = 1_000_000
# With `iterations` (a work budget) the choice may not depend on the clock: the lists are
# built up to this many entries, what a 60 s limit allows at the rate above.
MAX_ENTRIES = 30_000_000


def timed_overlap_lists(items: Sequence[Buffer], deadline: Deadline = NEVER
                        ) -> list[list[int]]:
    """anneal.py's `overlap_lists`, stopped by `deadline` (OutOfTime)."""
    nbrs = overlap_lists(items, deadline.passed)
    if nbrs is None:
        raise OutOfTime("overlap lists")
    return nbrs


@register("anneal")
def plan_anneal(buffers: Sequence[Buffer], *, seed: int = 0, iterations: int | None = None,
                time_limit: float | None = None, start: str = "best",
                t_start: float = 0.005, t_end: float = 0.0002) -> Placement:
    """Simulated annealing over the placement order (DSA-SA), anneal.py's loop.

    `iterations` (default 1000 when no `time_limit` is given; at most `MAX_MOVES`) bounds
    the moves and makes the result a function of `seed`, at any load; `time_limit`
    (seconds) bounds the annealing, and the note says when it cut the moves short. The
    start plans always run to their end: the plan is never above the best of them.
    `start`: the first order, "greedy-size" (largest first), "bestfit", or "best" (the
    best of those two and GE). Temperatures are fractions of the starting arena, cooling
    from `t_start` to `t_end`.
    """
    check_anneal_options(iterations, start, t_start, t_end, optional=True)
    check_time_limit("anneal", time_limit, optional=True)
    deadline = Deadline.after(time_limit)
    if iterations is None and time_limit is None:
        iterations = 1000
    items = [b for b in buffers if b.size]
    offsets = {b.id: 0 for b in buffers}
    if not items:
        return Placement.of(buffers, offsets, "anneal: nothing to place")
    lower = theoretical_minimum(items)
    # The start plans run to their end, whatever the time limit: never worse than them.
    perm, start_name, start_off = start_order(items, heuristic_plans(items, start,
                                                                     plain_offsets))
    try:
        if max(o + b.size for o, b in zip(start_off, items)) <= lower:
            raise OutOfTime("optimal: it meets the theoretical minimum")
        entries = 2 * overlapping_pairs(items)
        if iterations is not None and entries > MAX_ENTRIES:
            raise OutOfTime(f"its overlap lists would hold {entries:,} entries, more than "
                            f"the {MAX_ENTRIES:,} a work budget builds")
        if iterations is None and time_limit is not None and \
                entries > PAIRS_PER_SECOND * deadline.left() / 2:
            raise OutOfTime(f"its overlap lists would hold {entries:,} entries, more than "
                            f"{deadline.left():.1f} s left allow")
        order = Decoding(items, perm, timed_overlap_lists(items, deadline))
        start_arena = order.decode(0, deadline.passed)
        if start_arena is None:
            raise OutOfTime("decoding")
    except OutOfTime as stop:
        offsets.update((b.id, o) for b, o in zip(items, start_off))
        return Placement.of(buffers, offsets, f"anneal: 0 moves, {start_name}'s plan "
                            f"({stop.step})")
    limit = None if time_limit is None else deadline.left()    # what the start left
    t0 = now()

    def progress(k: int) -> float | None:
        """The fraction of the moves, or of the time left after the start, spent."""
        elapsed = now() - t0
        if k >= MAX_MOVES or (iterations is not None and k >= iterations) or \
                (limit is not None and elapsed >= limit):
            return None
        return k / iterations if iterations else elapsed / limit

    best_off, best, k, accepted = anneal(order, start_arena, seed, progress, t_start, t_end,
                                         deadline.passed)
    offsets.update((b.id, o) for b, o in zip(items, best_off))
    gain = 100.0 * (start_arena - best) / start_arena
    cut = ", the time limit stopped it" if time_limit is not None and \
        (iterations is None or k < iterations) else ""
    return Placement.of(buffers, offsets, f"anneal: {k} moves, {accepted} accepted, "
                        f"{start_arena} -> {best} B ({gain:.1f}% below {start_name}'s plan; "
                        f"no bound proved){cut}")
