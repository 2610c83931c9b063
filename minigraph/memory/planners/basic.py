"""The two reference points: no reuse at all, and MXNet's refcount simulation."""

from __future__ import annotations

from collections.abc import Sequence

from sortedcontainers import SortedList

from ...errors import PlanError
from ..buffers import Buffer, Placement
from . import blocks_to_offsets, register


@register("none")
def plan_none(buffers: Sequence[Buffer]) -> Placement:
    """No reuse: every buffer gets its own bytes (the baseline every saving is measured on)."""
    return Placement.of(buffers, blocks_to_offsets([[b] for b in buffers]))


@register("refcount")
def plan_refcount(buffers: Sequence[Buffer], *, match_range: int = 16) -> Placement:
    """MXNet's counter simulation, as nnvm's PlanMemory does it [Chen 2016], [NNVM 2016].

    Walk the steps. nnvm counts each tensor's pending readers down to 0 at its last
    reader; a `Buffer` knows that step, its `end`, so here a tensor returns to the pool at
    step `end`. At each step the outputs first take storage from the free pool - the
    smallest free block of at least the size, within `match_range` times it; else the
    largest smaller block of at least size / match_range, grown to the size; else new
    storage - and only then do the inputs that died go back. Blocks are laid end to end.
    `match_range` 0 turns reuse off, 1 reuses only blocks of exactly the size (nnvm: 16).
    """
    if isinstance(match_range, bool) or not hasattr(type(match_range), "__index__") \
            or match_range < 0:
        raise PlanError(f"refcount: match_range must be an integer >= 0, not {match_range!r}")
    by_start: dict[int, list[Buffer]] = {}
    by_end: dict[int, list[Buffer]] = {}
    for b in buffers:
        by_start.setdefault(b.start, []).append(b)
        by_end.setdefault(b.end, []).append(b)
    block_of: dict = {}
    blocks: list[list[Buffer]] = []
    block_size: list[int] = []
    free = SortedList()               # (block size, block id): the free pool
    for t in sorted(set(by_start) | set(by_end)):
        for b in by_start.get(t, ()):
            k = _take(free, b.size, match_range) if b.size else None
            if k is None:
                k = len(blocks)
                blocks.append([])
                block_size.append(0)
            else:
                del free[k[1]]
                k = k[0]
            blocks[k].append(b)
            block_size[k] = max(block_size[k], b.size)
            block_of[b.id] = k
        for b in by_end.get(t, ()):
            k = block_of[b.id]
            free.add((block_size[k], k))
    return Placement.of(buffers, blocks_to_offsets(blocks),
                        blocks=[[b.id for b in bl] for bl in blocks])


def _take(free: SortedList, size: int, match_range: int) -> tuple[int, int] | None:
    """The pool entry to reuse for `size` bytes, as (block id, position), or None. The
    pool is a `SortedList`: O(log n) per look-up, insertion and removal, where a plain
    sorted list moves O(pool) entries (quadratic on a training graph's large pools)."""
    if match_range == 0 or not free:
        return None
    mid = free.bisect_left((size, -1))
    hi = free.bisect_right((size * match_range, float("inf")))
    if mid < hi:                                  # smallest block that is large enough
        return free[mid][1], mid
    lo = free.bisect_left((size / match_range, -1))
    if mid - 1 >= lo:                             # largest smaller block, to be grown
        return free[mid - 1][1], mid - 1
    return None
