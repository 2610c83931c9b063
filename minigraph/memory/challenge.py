"""Challenging instances: tight arenas whose optimum lies above the theoretical minimum.

MiniMalloc's "challenging" benchmarks [Moffitt 2023] are a few hundred buffers from
compiled models, sizes in KiB, packed into a tight arena where nearly every step is full.
A guillotine tiling (`instances.hard_instance`) has that shape, but its optimum is the
theoretical minimum, so "how far from optimal?" is answered by the minimum alone. Real
problems are not so kind: their optimum is often above it, and only a proof says how far.

`challenge_instance(n, seed)` keeps the tight tiling and adds what makes an optimum rise
above the minimum: at a few steps the program is stretched (steps inserted; buffers alive
across the step stay alive through them) and the room left between those long-lived
buffers is filled by an *obstruction*: a small problem whose own optimum is one unit
above its theoretical minimum (`GAP_13`, 13 buffers: minimum 21 units, optimum 22, found
by sampling and proved by exhausting the search), scaled so that it exactly fills that
room at its busiest step. Every step still holds at most the capacity, so the theoretical
minimum is the capacity; but no plan fits there (the buffers alive through the inserted
steps hold the same bytes at each of them, and the obstruction needs one more unit),
so the optimum is at least the capacity plus one unit. The search proves that bound by
solving the inserted steps alone (`planners.search.window_proof`); a tiling elsewhere
may push the optimum higher still. From above, the optimum is bounded by the plan the
construction itself gives (`challenge_plan`): the tiling's layout with one unit opened
above each obstruction's room.
"""

from __future__ import annotations

import random

from ..errors import PlanError
from .buffers import Buffer
from .instances import guillotine_tiling
from .planners.greedy import lowest_gap

# (start, end, size in units) of 13 buffers over 13 steps: at most 21 units alive at a
# step, yet no plan within 21 units (the search exhausts every canonical plan; the ILP
# agrees). The optimum is 22 units. Found by sampling small random problems.
GAP_13 = ((6, 12, 3), (3, 9, 3), (0, 4, 3), (4, 4, 2), (3, 3, 6), (0, 1, 6), (1, 6, 2),
          (1, 5, 1), (9, 9, 3), (4, 5, 1), (5, 10, 4), (0, 6, 6), (4, 11, 3))
GAP_MINIMUM = 21          # its theoretical minimum, in units (its optimum is 22)
GAP_PLAN = (3, 12, 15, 4, 0, 0, 19, 21, 6, 3, 15, 6, 0)     # offsets of a 22-unit plan
GAP_STEPS = 13


def challenge_instance(n: int, seed: int = 0, capacity: int = 1 << 20,
                       granule: int = 1024, obstructions: int = 2) -> list[Buffer]:
    """n buffers (ids 0..n-1) in a `capacity`-byte arena: a guillotine tiling stretched at
    `obstructions` steps, each filled with a scaled, possibly time-mirrored `GAP_13`.

    The theoretical minimum is `capacity`; the optimum exceeds it by at least the largest
    unit of the obstructions (see the module docstring). Sizes are multiples of `granule`
    bytes, like MiniMalloc's KiB-sized buffers. Deterministic in `seed`."""
    return challenge_plan(n, seed, capacity, granule, obstructions)[0]


def challenge_plan(n: int, seed: int = 0, capacity: int = 1 << 20, granule: int = 1024,
                   obstructions: int = 2) -> tuple[list[Buffer], dict[int, int]]:
    """`challenge_instance` and the plan its construction gives (offsets by id), whose
    arena bounds the optimum from above as a proof bounds it from below.

    The plan is the tiling's layout, opened at each obstruction: every box at or above
    the top of the obstruction's room moves up one unit (at every step: two boxes that
    did not collide cannot collide after all those above some offset moved up alike), and
    the obstruction takes the room and that unit, laid out as `GAP_PLAN`."""
    extra = obstructions * (len(GAP_13) + 1)
    if n < extra + 8 or obstructions < 1:
        raise PlanError(f"challenge_instance: n = {n!r} is too small for {obstructions!r} "
                        f"obstructions (at least {extra + 8} buffers, 1 obstruction)")
    rng = random.Random(seed)
    tiles = n - extra
    tiling, layout = guillotine_tiling(tiles, capacity, 2 * tiles, seed, granule)
    boxes = [(b.start, b.end, b.size, layout[b.id]) for b in tiling]    # (s, e, z, offset)
    for t in sorted(_stretch_steps(tiling, layout, granule, obstructions, rng), reverse=True):
        across = [(y, y + z) for s, e, z, y in boxes if s < t <= e]
        room = capacity - sum(hi - lo for lo, hi in across)
        floor = lowest_gap(across, room)       # the room: where the boxes ending at t - 1 were
        unit, added = _obstruction(t, room, granule, rng.random() < 0.5)
        boxes = [(s + GAP_STEPS * (s >= t), e + GAP_STEPS * (e >= t), z,
                  y + unit * (y >= floor + room)) for s, e, z, y in boxes]
        boxes += [(s, e, z, floor + y) for s, e, z, y in added]
    boxes.sort()
    return ([Buffer(k, s, e, z) for k, (s, e, z, _) in enumerate(boxes)],
            {k: y for k, (_, _, _, y) in enumerate(boxes)})


def _stretch_steps(tiling: list[Buffer], layout: dict, granule: int, count: int,
                   rng: random.Random) -> list[int]:
    """`count` steps t to stretch, drawn among the quarter where the most bytes change
    hands (buffers end at t - 1, others start at t) in one contiguous range of the
    tiling's layout, with room for the obstruction at one granule a unit at least."""
    ending: dict[int, list[tuple[int, int]]] = {}
    for b in tiling:
        ending.setdefault(b.end + 1, []).append((layout[b.id], layout[b.id] + b.size))
    room = {}
    for t, spans in ending.items():
        spans.sort()
        if all(a[1] == b[0] for a, b in zip(spans, spans[1:])):
            room[t] = spans[-1][1] - spans[0][0]
    steps = sorted((t for t, z in room.items() if 0 < t < max(ending) - 1
                    and z > GAP_MINIMUM * granule), key=lambda t: (-room[t], t))
    if len(steps) < count:
        raise PlanError(f"challenge_instance: only {len(steps)} steps have room for an "
                        f"obstruction of {GAP_MINIMUM} x {granule} B; ask for fewer")
    return rng.sample(steps[:max(count, len(steps) // 4)], count)


def _obstruction(t: int, room: int, granule: int, mirror: bool
                 ) -> tuple[int, list[tuple[int, int, int, int]]]:
    """`GAP_13` at steps t .. t + 12, its unit the largest multiple of `granule` with
    21 units below `room` bytes, and one buffer over all 13 steps holding the rest:
    (unit, boxes as (start, end, size, offset in `room` + unit bytes)); the offsets are
    `GAP_PLAN`'s, the filler on top of its 22 units."""
    unit = (room - 1) // GAP_MINIMUM // granule * granule      # leaves some room over
    out = [(t + (GAP_STEPS - 1 - e if mirror else s), t + (GAP_STEPS - 1 - s if mirror else e),
            z * unit, y * unit) for (s, e, z), y in zip(GAP_13, GAP_PLAN)]
    return unit, out + [(t, t + GAP_STEPS - 1, room - GAP_MINIMUM * unit,
                         (GAP_MINIMUM + 1) * unit)]
