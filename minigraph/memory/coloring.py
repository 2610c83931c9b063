"""Parallel-safe sharing by colouring [Chen 2016, "Try to Allow More Parallelization"].

Find the longest path (most bytes written), give its nodes colour 0; find the longest
path among the remaining nodes, colour 1; ... k-1 paths, then every other node takes the
last colour. Storage is only shared between tensors of the same colour, so nodes on
different long paths never fight over bytes and could run concurrently. Each path search
is one pass in topological order: O(k * n).
"""

from __future__ import annotations

from ..graph import Graph
from .liveness import Liveness


def color_nodes(graph: Graph, live: Liveness, k: int) -> dict[str, int]:
    """Colour of every node: 0..k-2 for the k-1 heaviest paths, k-1 for the rest."""
    if k < 1:
        raise ValueError(f"colors must be >= 1, not {k}")
    order = list(live.schedule)
    colour = dict.fromkeys(order, k - 1)
    if k == 1:
        return colour
    reward = {n: sum(live.intervals[o].bytes for o in graph.node(n).outputs) or 1
              for n in order}
    preds = {n: [graph.tensors[i].producer for i in graph.node(n).inputs
                 if graph.tensors[i].producer is not None] for n in order}
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


def tensor_colors(graph: Graph, live: Liveness, k: int) -> dict[str, int]:
    """A tensor's colour is its producer's colour."""
    nodes = color_nodes(graph, live, k)
    return {name: nodes[graph.tensors[name].producer] for name in live.intervals
            if graph.tensors[name].producer is not None}
