"""Parallel-safe sharing by colouring [Chen 2016, "Try to Allow More Parallelization"].

Find the longest path, give its nodes colour 0; find the next longest, colour 1; ... k-1
paths, then every other node takes the last colour. Storage is only shared between
tensors of the same colour, so nodes on different long paths never fight over bytes and
could run concurrently. Each path search is one pass in topological order: O(k * n).

Two ways to measure "longest", named in `COLORINGS` (`MemoryOptions(coloring=...)`):
- "bytes": a path is worth the bytes its nodes write, and each search only walks nodes
  not yet coloured (minigraph's variant, the default).
- "nnvm": nnvm's `ColorNodeGroup` [NNVM 2016]: every op node is worth 1, a coloured node
  is worth 0 but a path may still pass through it, and ties go to the node latest in
  the schedule.

Colouring is a heuristic: a reader off a path is not kept apart (lesson 04). `safe=True`
(`safe_placement`) is the guarantee: two tensors share bytes only when every use of the
first is ordered before the second's producer by the graph's edges.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import PlanError
from ..graph import Graph
from .buffers import Buffer, Placement
from .liveness import Liveness
from .plan import MemoryPlan
from .planners import plan_buffers

Coloring = Callable[[Graph, Liveness, int], dict[str, int]]
COLORINGS: dict[str, Coloring] = {}


def register_coloring(name: str) -> Callable[[Coloring], Coloring]:
    """A decorator that adds a colouring to `COLORINGS` under `name`."""
    def deco(fn: Coloring) -> Coloring:
        COLORINGS[name] = fn
        return fn
    return deco


def check_coloring(name: Any) -> str:
    """`name` if it names a colouring of `COLORINGS`; else PlanError listing the known."""
    if not isinstance(name, str) or name not in COLORINGS:
        raise PlanError(f"unknown coloring {name!r}; known: {', '.join(sorted(COLORINGS))}")
    return name


def color_nodes(graph: Graph, live: Liveness, k: int, coloring: str = "bytes"
                ) -> dict[str, int]:
    """Colour of every node: 0..k-2 for the first k-1 paths, the next colour for the rest."""
    if k < 1:
        raise ValueError(f"colors must be >= 1, not {k}")
    return COLORINGS[check_coloring(coloring)](graph, live, k)


def tensor_colors(graph: Graph, live: Liveness, k: int, coloring: str = "bytes"
                  ) -> dict[str, int]:
    """A tensor's colour is its producer's colour."""
    nodes = color_nodes(graph, live, k, coloring)
    return {name: nodes[graph.tensors[name].producer] for name in live.intervals
            if graph.tensors[name].producer is not None}


def _producers(graph: Graph, n: str) -> list[str]:
    """The nodes whose outputs node `n` reads (data edges only, as in both colourings)."""
    return [graph.tensors[i].producer for i in graph.node(n).inputs
            if graph.tensors[i].producer is not None]


@register_coloring("bytes")
def bytes_coloring(graph: Graph, live: Liveness, k: int) -> dict[str, int]:
    """Paths weighted by the bytes their nodes write (a node that writes none counts 1),
    each search over the nodes not yet coloured; the rest take colour k-1."""
    order = list(live.schedule)
    colour = dict.fromkeys(order, k - 1)
    if k == 1:
        return colour
    reward = {n: sum(live.intervals[o].bytes for o in graph.node(n).outputs) or 1
              for n in order}
    preds = {n: _producers(graph, n) for n in order}
    free = set(order)
    for c in range(k - 1):
        best: dict[str, tuple[int, str | None]] = {}
        for n in order:
            if n not in free:
                continue
            back = max(((best[p][0], p) for p in preds[n] if p in best), default=(0, None))
            best[n] = (back[0] + reward[n], back[1])
        if not best:
            break
        n: str | None = max(best, key=lambda m: best[m][0])
        while n is not None:
            colour[n] = c
            free.discard(n)
            n = best[n][1]
    return colour


def nnvm_best_path(preds: Sequence[Sequence[int]], reward: Sequence[int]
                   ) -> tuple[int, list[int]]:
    """nnvm's `FindBestPath` [NNVM 2016]: nodes are 0..n-1 in topological order; walk them
    backwards, each node's best is its reward plus its best successor's (the first one
    met, i.e. the latest, wins a tie); the path starts at the best node met first."""
    n = len(reward)
    best, nxt = [0] * n, [n] * n
    total, start = 0, 0
    for v in reversed(range(n)):
        best[v] += reward[v]
        if best[v] > total:
            total, start = best[v], v
        for p in preds[v]:
            if best[v] > best[p]:
                best[p], nxt[p] = best[v], v
    path, v = [], start
    while v < n:
        path.append(v)
        v = nxt[v]
    return total, path


@register_coloring("nnvm")
def nnvm_coloring(graph: Graph, live: Liveness, k: int) -> dict[str, int]:
    """nnvm's `ColorNodeGroup` [NNVM 2016] on the schedule: each op is worth 1 (nnvm gives
    its variable nodes 0; minigraph's inputs are not nodes); a path's nodes take the next
    colour and drop to worth 0, so later paths may run through them without recolouring
    them. It stops after k-1 paths or when the best path is worth 0; every node left takes
    the colour after the last path's. (nnvm colours only when NNVM_EXEC_NUM_TEMP > 1, and
    matches a freed block by the colour of the node that released it; minigraph gives a
    tensor its producer's colour and plans each colour in its own region, any planner.)"""
    order = list(live.schedule)
    pos = {n: i for i, n in enumerate(order)}
    preds = [[pos[p] for p in _producers(graph, n)] for n in order]
    importance = [1] * len(order)
    colour = [k] * len(order)               # k: not coloured yet
    cindex = 0
    while cindex < k - 1:
        reward, path = nnvm_best_path(preds, importance)
        if reward == 0:
            break
        for v in path:
            if importance[v]:
                colour[v], importance[v] = cindex, 0
        cindex += 1
    return {n: cindex if colour[i] == k else colour[i] for i, n in enumerate(order)}


# ---------------------------------------------------------------------------------------
# Safe mode: zero parallel hazards [Chen 2016, "Be Correct and Safe First"]
# ---------------------------------------------------------------------------------------

#: Rounds of "plan, find the hazards, keep those pairs apart" before the proven bound.
SAFE_ROUNDS = 256


def ancestor_bits(graph: Graph, order: Sequence[str]) -> dict[str, int]:
    """Every node's ancestors through data and control edges, as a bitset over `order`."""
    pos = {n: i for i, n in enumerate(order)}
    anc: dict[str, int] = {}
    for n in order:
        bits = 0
        for p in [*_producers(graph, n), *graph.node(n).deps]:
            bits |= anc[p] | (1 << pos[p])
        anc[n] = bits
    return anc


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
    pos = {n: i for i, n in enumerate(order)}
    desc = dict.fromkeys(order, 0)
    for n in reversed(order):
        for p in [*_producers(graph, n), *graph.node(n).deps]:
            desc[p] |= desc[n] | (1 << pos[n])
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
    stop = None if limit is None else time.perf_counter() + limit
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
    left = None if stop is None else stop - time.perf_counter()
    ends = {b.id: b.end for b in buffers}
    starts = {name: live.intervals[name].start for name in group}
    for rounds in range(1, SAFE_ROUNDS + 2):
        proven = rounds > SAFE_ROUNDS or (stop is not None and
                                          stop - time.perf_counter() < left / 2)
        if proven:
            for name, end in safe_ends(graph, live).items():
                ends[group[name]] = max(ends[group[name]], end)
        stretched = [dataclasses.replace(b, end=ends[b.id]) for b in buffers]
        if stop is not None:
            options = {**options, "time_limit": max((stop - time.perf_counter()) /
                                                    (1 if proven else 2), 1e-3)}
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
