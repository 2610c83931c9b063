"""GE's block reuse [Huawei GE, §1]: Max block, Binary block, Hybrid, and GE's own
two-level reuse.

A *block* is a virtual piece of memory that several tensors use one after another. The
three classic steps [Huawei GE, §1.1]:

1. ranges: the block sizes a tensor may ask for. Max block has one, the largest tensor
   size; Binary block has several, roughly doubling (`binary_ranges`).
2. reuse: walk the tensors in schedule (start) order; a tensor takes a free block of its
   own range - a block whose last tensor died before this one starts - or opens a new one.
3. resize: each block shrinks to the largest tensor it held, rounded up to the alignment
   (512 bytes in GE); the blocks are laid end to end.

GE's improvement [Huawei GE, §1.2], two levels (`plan_ge`), gives 4608 bytes on the worked
example, the theoretical minimum, where Max block needs 6656 and no reuse 8704. Level 2
asks greedy.py's `PlacedBoxes` for the lowest offset free; this is "ge:textbook", and the
registry's "ge" runs the same `ge_offsets` with the engine's faster boxes
(`engine/heuristics.py`): the same offsets (tests/test_planner_tiers.py).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Sequence
from itertools import accumulate
from typing import Any

from ..buffers import Buffer, Placement, align_up
from . import blocks_to_offsets, register
from .greedy import PlacedBoxes

GE_ALIGN = 512
LARGE_BLOCK = 8 * 1024 * 1024     # GE never merges away a range of >= 2 sizes this large


def reuse_blocks(buffers: Sequence[Buffer], range_of: Callable[[Buffer], Hashable]
                 ) -> list[list[Buffer]]:
    """Step 2 for any range rule: walk buffers by start; each takes the lowest-numbered
    free block of its own range (free: its last tensor ended before this one starts),
    else a new block. Zero-byte buffers get a block of their own. O(n log n)."""
    blocks: list[list[Buffer]] = []
    busy: dict[Hashable, list[tuple[int, int]]] = {}    # range -> heap of (end, block)
    free: dict[Hashable, list[int]] = {}                # range -> heap of block numbers
    for b in sorted(buffers, key=lambda b: b.start):    # stable: ties keep list order
        if not b.size:
            blocks.append([b])
            continue
        r = range_of(b)
        bh, fh = busy.setdefault(r, []), free.setdefault(r, [])
        while bh and bh[0][0] < b.start:
            heapq.heappush(fh, heapq.heappop(bh)[1])
        if fh:
            k = heapq.heappop(fh)
        else:
            k = len(blocks)
            blocks.append([])
        blocks[k].append(b)
        heapq.heappush(bh, (b.end, k))
    return blocks


def _placement(buffers: Sequence[Buffer], blocks: list[list[Buffer]], alignment: int,
               note: str = "") -> Placement:
    """Step 3: resize every block to its largest tensor (aligned) and lay them end to end."""
    return Placement.of(buffers, blocks_to_offsets(blocks, alignment), note,
                        [[b.id for b in bl] for bl in blocks])


@register("ge-max")
def plan_ge_max(buffers: Sequence[Buffer], *, alignment: int = GE_ALIGN) -> Placement:
    """Max block: every block has the one range (the largest size), so any free block
    will do; then each block is resized to the largest tensor it held."""
    blocks = reuse_blocks(buffers, lambda b: 0)
    return _placement(buffers, blocks, alignment, f"max block: {len(blocks)} blocks")


def binary_ranges(sizes: Sequence[int], align: int = GE_ALIGN) -> list[int]:
    """Range ceilings as GE's BinaryBlockMemAssigner builds them. The smallest range is
    `align` (512) when the largest size exceeds it, else the smallest size; there are
    ceil(log2(max / min)) ranges, each twice the last; sizes go to the first range they
    fit. A range with fewer than len(sizes) / ranges sizes is merged into the next (unless
    it is the last, or holds two sizes >= 8 MiB). A ceiling is the largest size held."""
    sizes = sorted(s for s in sizes if s > 0)
    if not sizes:
        return []
    low = align if sizes[-1] > align else sizes[0]
    count = max(1, math.ceil(math.log2(sizes[-1] / low)))
    limit = len(sizes) // count
    ranges: list[list[int]] = [[] for _ in range(count)]
    k, ceil = 0, low
    for i in range(count):
        ceil *= 2
        while k < len(sizes) and sizes[k] <= ceil:
            ranges[i].append(sizes[k])
            k += 1
    ranges[-1].extend(sizes[k:])        # (only when rounding left some out)
    changed = True
    while changed:                      # GE's PlanRanges: drop empty, merge sparse ranges
        changed = False
        out: list[list[int]] = []
        carry: list[int] = []
        for i, r in enumerate(ranges):
            r = r + carry
            carry = []
            last = i == len(ranges) - 1
            if not r:
                changed = True
            elif len(r) < limit and not last and not (r[0] >= LARGE_BLOCK and len(r) >= 2):
                carry = r
                changed = True
            else:
                out.append(r)
        ranges = out
    return [max(r) for r in ranges]


@register("ge-binary")
def plan_ge_binary(buffers: Sequence[Buffer], *, alignment: int = GE_ALIGN) -> Placement:
    """Binary block: a tensor asks for the smallest range ceiling >= its size and may only
    reuse a block of that same range; then each block is resized to its largest tensor."""
    ceilings = binary_ranges([b.size for b in buffers])

    def range_of(b: Buffer) -> int:             # the first range whose ceiling it fits
        return next((k for k, c in enumerate(ceilings) if b.size <= c), len(ceilings))

    blocks = reuse_blocks(buffers, range_of)
    return _placement(buffers, blocks, alignment,
                      f"binary block: ranges {ceilings}, {len(blocks)} blocks")


@register("ge-hybrid")
def plan_ge_hybrid(buffers: Sequence[Buffer], *, alignment: int = GE_ALIGN) -> Placement:
    """GE's HybridMemAssigner: run Max block and Binary block, keep the smaller arena."""
    a = plan_ge_max(buffers, alignment=alignment)
    b = plan_ge_binary(buffers, alignment=alignment)
    return a if a.arena_bytes <= b.arena_bytes else b


@register("ge:textbook")
def plan_ge(buffers: Sequence[Buffer], *, alignment: int = GE_ALIGN, holes: bool = True
            ) -> Placement:
    """GE's two-level reuse [Huawei GE, §1.2]. Level 1: reuse a block only for a tensor of
    exactly the same size. Level 2: blocks by size, largest first (earlier first on ties);
    each goes to the lowest offset free for its whole lifetime - inside a larger block
    whose lifetime it misses, else on top.

    A block's lifetime is the steps at which one of its tensors is alive; with
    `holes=False` the hull, first start to last end, as [Huawei GE] draws it (figure 6).
    Level 1 ties same-size tensors far apart in time to one offset, which level 2 must
    find free at all their steps: on long random problems that costs more than it saves
    (benchmarks/plan_scaling.py, against greedy-size, which is level 2 alone)."""
    return two_level_placement(buffers, *ge_offsets(buffers, alignment, holes))


def ge_offsets(buffers: Sequence[Buffer], alignment: int = GE_ALIGN, holes: bool = True,
               index: Callable[..., Any] = PlacedBoxes
               ) -> tuple[dict[Hashable, int], list[list[Buffer]]]:
    """The two levels of `plan_ge`: offsets by id and the level-1 blocks. Level 2 asks
    greedy.py's question, "the lowest offset free at these steps", of `index` (made from
    every block's spans and sizes; a block of k tensors is k boxes at one offset)."""
    blocks = [bl for bl in reuse_blocks(buffers, lambda b: b.size) if bl[0].size]
    spans = [[(b.start, b.end) for b in bl] if holes else
             [(bl[0].start, max(b.end for b in bl))] for bl in blocks]
    size = [align_up(bl[0].size, alignment) for bl in blocks]
    order = sorted(range(len(blocks)), key=lambda k: (-size[k], blocks[k][0].start, k))
    boxes = index([span for sp in spans for span in sp],
                  [size[k] for k, sp in enumerate(spans) for _ in sp])
    # block k's boxes are numbers first[k] .. first[k + 1] - 1
    first = list(accumulate((len(sp) for sp in spans), initial=0))
    offsets: dict[Hashable, int] = {b.id: 0 for b in buffers}
    for k in order:
        numbers = range(first[k], first[k + 1])
        off = boxes.lowest(numbers, size[k])
        boxes.add(numbers, off)
        for b in blocks[k]:
            offsets[b.id] = off
    return offsets, blocks


def two_level_placement(buffers: Sequence[Buffer], offsets: dict[Hashable, int],
                        blocks: list[list[Buffer]]) -> Placement:
    """The placement of `ge_offsets`, its level-1 blocks listed and counted in the note."""
    return Placement.of(buffers, offsets, f"{sum(1 for b in buffers if b.size)} tensors -> "
                        f"{len(blocks)} level-1 blocks", [[b.id for b in bl] for bl in blocks])
