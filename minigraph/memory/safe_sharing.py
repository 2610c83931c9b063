"""Safe mode: zero parallel hazards [Chen 2016, "Be Correct and Safe First"].

Colouring (coloring.py) keeps the nodes of long paths apart, but it is a heuristic: a
reader off a path is not kept apart (lesson 04). Safe mode is the guarantee: two tensors
share bytes only when every use of the first is ordered before the second's producer by
the graph's edges, whatever order a parallel runtime picks. `safe_pairs` keeps only the
in-place hand-overs that are safe; `safe_placement` plans two ways, keeping the smaller
arena: `safe_classes` (safe by construction) and `stretch_rounds` (plan, keep the
hazardous pairs apart, repeat; `safe_ends` is the bound proven for any planner).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import PlanError
from ..graph import Graph
from .buffers import Buffer, Placement
from .clock import now
from .liveness import Liveness
from .plan import MemoryPlan, ancestor_bits, descendant_bits
from .planners import plan_buffers

#: Rounds of "plan, find the hazards, keep those pairs apart" before the proven bound.
SAFE_ROUNDS = 256


def ordered_before(graph: Graph, anc: Mapping[str, int], pos: Mapping[str, int], a: str,
                   b: str) -> bool:
    """Every use of tensor `a` (its producer and readers) other than b's producer is an
    ancestor of b's producer: b may then take a's bytes under any parallel schedule."""
    pb = graph.tensors[b].producer
    users = [graph.tensors[a].producer, *graph.consumers[a]]
    return all(u == pb or (anc[pb] >> pos[u]) & 1 for u in users)


def safe_pairs(graph: Graph, live: Liveness, pairs: Sequence[tuple[str, str]]
               ) -> list[tuple[str, str]]:
    """The in-place hand-overs (a, b) that are no hazard: a's other readers are ordered
    before b's producer (always so under the "strict" rule)."""
    anc = ancestor_bits(graph, live.schedule)
    pos = {n: i for i, n in enumerate(live.schedule)}
    return [(a, b) for a, b in pairs if ordered_before(graph, anc, pos, a, b)]


def safe_ends(graph: Graph, live: Liveness) -> dict[str, int]:
    """The proven bound: each planned tensor `a` held until the last step whose node is
    not a descendant of every use of `a`. A tensor born later then has a producer that
    every use of `a` precedes, so no interval planner can make a hazard."""
    order = live.schedule
    desc = descendant_bits(graph, order)
    full = (1 << len(order)) - 1
    ends = {}
    for iv in live.planned():
        after = full
        for u in [graph.tensors[iv.name].producer, *graph.consumers[iv.name]]:
            after &= desc[u]
        ends[iv.name] = max(iv.end, (full & ~after).bit_length() - 1)
    return ends


def safe_classes(graph: Graph, live: Liveness, buffers: Sequence[Buffer],
                 group: Mapping[str, str]) -> list[Buffer]:
    """`buffers` recoloured into classes within their colours: a buffer joins the first
    class where every use of every tensor already there and dead before it is born is
    an ancestor of its tensors' producers. Any interval planner then makes no hazard: two
    buffers of one class share bytes only when one dies before the other is born."""
    pos = {n: i for i, n in enumerate(live.schedule)}
    anc = ancestor_bits(graph, live.schedule)
    members: dict[str, list[str]] = {}
    for name, gid in group.items():
        members.setdefault(gid, []).append(name)
    classes: list[tuple[int, list[int], list[tuple[int, int]]]] = []   # colour, dead, alive
    out = []
    for buf in sorted(buffers, key=lambda b: (b.start, b.end)):
        before, uses = [], 0                  # what its producers follow; its tensors' uses
        for name in members[buf.id]:
            p = graph.tensors[name].producer
            before.append(anc[p] | 1 << pos[p])
            for u in [p, *graph.consumers[name]]:
                uses |= 1 << pos[u]
        chosen = None
        for k, (colour, dead, alive) in enumerate(classes):
            if colour != buf.color:
                continue
            while alive and alive[0][0] < buf.start:      # died before buf is born
                dead[0] |= heapq.heappop(alive)[1]
            if all(dead[0] & ~b == 0 for b in before):
                chosen = k
                break
        if chosen is None:
            chosen = len(classes)
            classes.append((buf.color, [0], []))
        heapq.heappush(classes[chosen][2], (buf.end, uses))
        out.append(dataclasses.replace(buf, color=chosen))
    return out


def safe_placement(graph: Graph, live: Liveness, buffers: Sequence[Buffer],
                   group: Mapping[str, str], pairs: Sequence[tuple[str, str]],
                   planner: str, alignment: int, **options: Any
                   ) -> tuple[list[Buffer], Placement]:
    """Plan `buffers` (tensor -> buffer id in `group`; `pairs` already `safe_pairs`) with
    zero parallel hazards, two ways, and keep the smaller arena: `safe_classes`, safe by
    construction, and `stretch_rounds`, which plans and stretches until no hazard is
    left. Returns the buffers planned and the placement; a `time_limit` covers both."""
    limit = options.get("time_limit")
    stop = None if limit is None else now() + limit
    split = safe_classes(graph, live, buffers, group)
    first = options if stop is None else {**options, "time_limit": limit / 3}
    _, by_class = plan_buffers(split, planner, alignment, **first)
    stretched, by_rounds = stretch_rounds(graph, live, buffers, group, pairs, planner,
                                          alignment, stop, **options)
    if by_class.arena_bytes < by_rounds.arena_bytes:
        note = f"safe by {len({b.color for b in split})} class(es)"
        return split, dataclasses.replace(
            by_class, note="; ".join(filter(None, [by_class.note, note])))
    return stretched, by_rounds


def stretch_rounds(graph: Graph, live: Liveness, buffers: Sequence[Buffer],
                   group: Mapping[str, str], pairs: Sequence[tuple[str, str]],
                   planner: str, alignment: int, stop: float | None, **options: Any
                   ) -> tuple[list[Buffer], Placement]:
    """Each round plans, asks `MemoryPlan.parallel_hazards` for the pairs (a, b) sharing
    bytes unsafely and stretches a's buffer to b's birth, so the two overlap in time and
    no planner may share them again. After `SAFE_ROUNDS` rounds (or once half the time
    left at `stop` is spent) every buffer is stretched to `safe_ends`, the proven bound."""
    left = None if stop is None else stop - now()
    ends = {b.id: b.end for b in buffers}
    starts = {name: live.intervals[name].start for name in group}
    for rounds in range(1, SAFE_ROUNDS + 2):
        proven = rounds > SAFE_ROUNDS or (stop is not None and stop - now() < left / 2)
        if proven:
            for name, end in safe_ends(graph, live).items():
                ends[group[name]] = max(ends[group[name]], end)
        stretched = [dataclasses.replace(b, end=ends[b.id]) for b in buffers]
        if stop is not None:
            options = {**options, "time_limit": max((stop - now()) / (1 if proven else 2), 1e-3)}
        _, placement = plan_buffers(stretched, planner, alignment, **options)
        offsets = {name: placement.offsets[gid] for name, gid in group.items()}
        hazards = MemoryPlan(live, offsets, 0, list(pairs)).parallel_hazards(graph)
        if not hazards:
            note = f"safe after {rounds} round(s){', proven bound' if proven else ''}"
            return stretched, dataclasses.replace(
                placement, note="; ".join(filter(None, [placement.note, note])))
        if proven:
            break
        for a, b in hazards:
            ends[group[a]] = max(ends[group[a]], starts[b])
    raise PlanError(f"safe mode left parallel hazard {hazards[0]} after {rounds} rounds "
                    "(the proven bound should never allow one)")
