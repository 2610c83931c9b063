"""Topological orders (schedules) that change lifetimes: [Huawei GE, §2].

A schedule fixes every tensor's lifetime, hence the theoretical minimum; a planner can at
best reach that minimum, a better schedule lowers it. The orders here:

- "bfs": a FIFO ready queue (TensorFlow's executor order).
- "dfs": a LIFO ready stack: follow one branch to its end before the next (the
  "left branch first" of [Huawei GE] when the left branch was built first).
- "rdfs": reverse DFS: post-order of a depth-first walk from the graph outputs back
  through the inputs (nnvm's DFSVisit): each node runs just when something needs it.
- "ge": GE's adjustment [Huawei GE, §2.2] of the program order: a node whose inputs will
  stay alive anyway moves to just before its first consumer (see `ge_adjust`).
- "memory": a list scheduler that runs the ready node which frees the most bytes and
  allocates the least (MODeL's observation [Steiner 2023, fig. 3]).
- "best": every order above, keep the one with the lowest theoretical minimum (XLA's
  default scheduler runs several and keeps the best the same way).

Every order respects data and control dependencies (`Node.deps`).
"""

from __future__ import annotations

import heapq
from collections import deque

from ..graph import Graph
from .buffers import theoretical_minimum
from .liveness import PLANNED_KINDS, liveness
from .orders import ORDERS, register_order


def _edges(graph: Graph) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Predecessors (producers of inputs, then control deps) and successors of every
    node, each list without repeats and in program order."""
    preds: dict[str, list[str]] = {n.name: [] for n in graph.nodes}
    succs: dict[str, list[str]] = {n.name: [] for n in graph.nodes}
    for n in graph.nodes:
        ps = preds[n.name]
        for p in [graph.tensors[i].producer for i in n.inputs] + list(n.deps):
            if p is not None and p not in ps:
                ps.append(p)
                succs[p].append(n.name)
    return preds, succs


def _planned_bytes(graph: Graph) -> dict[str, int]:
    """Bytes of every tensor the planner will place (activations and gradients that are
    not graph outputs); 0 for the rest."""
    outs = set(graph.outputs)
    return {t.name: (t.nbytes if t.kind in PLANNED_KINDS and t.name not in outs
                     and not t.alias_of else 0) for t in graph.tensors.values()}


@register_order("bfs")
def bfs_order(graph: Graph) -> list[str]:
    """Kahn's algorithm with a FIFO queue: run nodes in the order they became ready."""
    preds, succs = _edges(graph)
    waiting = {v: len(ps) for v, ps in preds.items()}
    queue = deque(v for v in waiting if not waiting[v])
    out = []
    while queue:
        v = queue.popleft()
        out.append(v)
        for s in succs[v]:
            waiting[s] -= 1
            if not waiting[s]:
                queue.append(s)
    return out


@register_order("dfs")
def dfs_order(graph: Graph) -> list[str]:
    """Kahn's algorithm with a LIFO stack: after a node, run its first newly ready
    consumer next, so one branch runs to its end before the next starts."""
    preds, succs = _edges(graph)
    waiting = {v: len(ps) for v, ps in preds.items()}
    stack = [v for v in waiting if not waiting[v]][::-1]
    out = []
    while stack:
        v = stack.pop()
        out.append(v)
        ready = []
        for s in succs[v]:
            waiting[s] -= 1
            if not waiting[s]:
                ready.append(s)
        stack.extend(reversed(ready))
    return out


@register_order("rdfs")
def rdfs_order(graph: Graph) -> list[str]:
    """Reverse DFS: from each graph output, visit the producers of a node's inputs (in
    input order, then its control deps) before the node itself; nodes no output needs
    follow, visited the same way, in program order."""
    preds, _ = _edges(graph)
    done: set[str] = set()
    out: list[str] = []
    roots = [graph.tensors[o].producer for o in graph.outputs] + [n.name for n in graph.nodes]
    for root in roots:
        if root is None or root in done:
            continue
        stack = [(root, iter(preds[root]))]
        done.add(root)
        while stack:
            v, it = stack[-1]
            p = next(it, None)
            while p is not None and p in done:
                p = next(it, None)
            if p is None:
                stack.pop()
                out.append(v)
            else:
                done.add(p)
                stack.append((p, iter(preds[p])))
    return out


def ge_adjust(graph: Graph, order: list[str], strict: bool = False) -> list[str]:
    """GE's topo adjustment [Huawei GE, §2.2]: move nodes later, to just before their
    first consumer, when that cannot lengthen any input's life.

    Fixed rule: a node whose inputs are all long-lived - inputs, parameters, constants,
    which are never reused - can move freely. Dynamic rule: L1 is the last step at which
    an input is still read by some other node, L2 the first step that reads the node's
    outputs; if L1 >= L2 for every planned input, moving the node to just before L2
    leaves every input's life as it was and shortens its outputs' lives. [Huawei GE]
    states L1 > L2 for one input; equality (the first consumer reads the input too) is as
    safe, so it moves here unless `strict`. Nodes are visited from last to first, so a node
    moves in front of its consumers' final places, never before what it depends on."""
    preds, succs = _edges(graph)
    planned = _planned_bytes(graph)
    # Order maintenance: a doubly linked list, and float keys to compare positions.
    key = {v: float(k) for k, v in enumerate(order)}
    prev = {v: (order[k - 1] if k else None) for k, v in enumerate(order)}
    nxt = {v: (order[k + 1] if k + 1 < len(order) else None) for k, v in enumerate(order)}
    head = [order[0] if order else None]

    def unlink(v: str) -> None:
        p, n = prev[v], nxt[v]
        if p is None:
            head[0] = n
        else:
            nxt[p] = n
        if n is not None:
            prev[n] = p

    def insert_before(v: str, c: str) -> None:
        p = prev[c]
        lo = key[p] if p is not None else key[c] - 1.0
        k = (lo + key[c]) / 2
        if not lo < k < key[c]:            # floats ran out of room: renumber everything
            w, i = head[0], 0.0
            while w is not None:
                key[w], w, i = i, nxt[w], i + 1.0
            lo = key[p] if p is not None else key[c] - 1.0
            k = (lo + key[c]) / 2
        prev[v], nxt[v], key[v] = p, c, k
        prev[c] = v
        if p is None:
            head[0] = v
        else:
            nxt[p] = v

    readers = {t: list(cs) for t, cs in graph.consumers.items()}
    for v in reversed(order):
        if not succs[v]:
            continue
        first = min(succs[v], key=key.__getitem__)          # L2: the earliest consumer
        if prev[first] == v:
            continue                                         # already just before it
        node = graph.node(v)
        safe = True
        for t in set(node.inputs):
            if not planned[t]:
                continue                                     # long-lived: fixed rule
            l1 = max((key[r] for r in readers[t] if r != v), default=key[v])
            if l1 < key[first] or (strict and l1 == key[first]):   # t would live longer
                safe = False
                break
        if safe:
            unlink(v)
            insert_before(v, first)
    out, w = [], head[0]
    while w is not None:
        out.append(w)
        w = nxt[w]
    return out


@register_order("ge")
def ge_order(graph: Graph) -> list[str]:
    """The program order after GE's adjustment (`ge_adjust`)."""
    return ge_adjust(graph, [n.name for n in graph.nodes])


@register_order("memory")
def memory_order(graph: Graph) -> list[str]:
    """List scheduling: among the ready nodes run the one that frees the most planned
    bytes (inputs it reads last) minus the bytes it allocates; program order on ties."""
    preds, succs = _edges(graph)
    planned = _planned_bytes(graph)
    rank = {n.name: k for k, n in enumerate(graph.nodes)}
    left = {t: len(cs) for t, cs in graph.consumers.items()}    # readers still to run
    inputs = {n.name: sorted(set(n.inputs)) for n in graph.nodes}
    alloc = {n.name: sum(planned[o] for o in n.outputs) for n in graph.nodes}
    waiting = {v: len(ps) for v, ps in preds.items()}

    def score(v: str) -> int:
        freed = sum(planned[t] for t in inputs[v] if left[t] == 1)
        return alloc[v] - freed                    # lower is better

    heap = [(score(v), rank[v], v) for v, w in waiting.items() if not w]
    heapq.heapify(heap)
    ready = {v for _, _, v in heap}
    out = []
    while heap:
        s, _, v = heapq.heappop(heap)
        if v not in ready or s != score(v):
            continue                               # a stale entry
        ready.discard(v)
        out.append(v)
        for t in inputs[v]:
            left[t] -= 1
            if left[t] == 1:                       # its last reader now frees it
                for r in graph.consumers[t]:
                    if r in ready:
                        heapq.heappush(heap, (score(r), rank[r], r))
        for s2 in succs[v]:
            waiting[s2] -= 1
            if not waiting[s2]:
                ready.add(s2)
                heapq.heappush(heap, (score(s2), rank[s2], s2))
    return out


BEST_OF = ("program", "dfs", "rdfs", "bfs", "ge", "memory")


@register_order("best")
def best_order(graph: Graph) -> list[str]:
    """Run every order in `BEST_OF` and keep the one with the lowest theoretical
    minimum, in exact bytes (alignment 1: an order sees no MemoryOptions); the first of
    them on ties."""
    return min((ORDERS[name](graph) for name in BEST_OF),
               key=lambda s: theoretical_minimum(liveness(graph, s, alignment=1).buffers()))
