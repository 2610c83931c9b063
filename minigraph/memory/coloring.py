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

Colouring is a heuristic: a reader off a path is not kept apart (lesson 04); `safe=True`
(safe_sharing.py) is the guarantee.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import PlanError
from ..graph import Graph
from .liveness import Liveness

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


def producers(graph: Graph, n: str) -> list[str]:
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
    preds = {n: producers(graph, n) for n in order}
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
    the colour after the last path's. (nnvm matches a freed block by the colour of the node
    that released it; here a tensor takes its producer's colour, each colour planned in its
    own region.)"""
    order = list(live.schedule)
    pos = {n: i for i, n in enumerate(order)}
    preds = [[pos[p] for p in producers(graph, n)] for n in order]
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
