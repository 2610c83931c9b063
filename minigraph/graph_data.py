"""The plain data a `Graph` is made of: a `TensorInfo` per tensor and a `Node` per op
application, referring to each other by name; the checks that make such data a graph the
executor can run, and its topological order (a cycle named), for `Graph.from_nodes`.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import CycleError, GraphError
from .tensor import as_dtype, as_shape


@dataclass(frozen=True)
class TensorInfo:
    """What the graph knows of a tensor. `kind`: input, param, const, activation, gradient,
    updated (a parameter's new value, written over the parameter in place)."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str
    producer: str | None = None
    index: int = 0
    value: Any = field(default=None, repr=False, compare=False)
    init: Any = field(default=None, repr=False, compare=False)
    alias_of: str | None = None   # for "updated": the parameter it overwrites

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def is_leaf(self) -> bool:
        return self.producer is None

    def spec(self) -> str:
        return f"{self.name}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Node:
    """One op application. Inputs, outputs and control dependencies are names."""
    name: str
    op: str
    attrs: tuple = ()
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    role: str = "forward"
    deps: tuple[str, ...] = ()

    @property
    def attr(self) -> dict:
        return dict(self.attrs)


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v

LEAF_KINDS = ("input", "param", "const")
_KINDS = LEAF_KINDS + ("activation", "gradient", "updated")


def check_plain_data(nodes: list[Node], tensors: Mapping[str, TensorInfo]) -> None:
    """GraphError/ShapeError unless the plain data describes a graph the executor can run:
    one writer per tensor (else the last writer would win), a producer for every tensor
    that is not a leaf (else it is read uninitialised), producers that exist."""
    writer: dict[str, str] = {}
    for n in nodes:
        for o in n.outputs:
            if o in writer:
                raise GraphError(f"tensor {o!r} is written by two nodes, {writer[o]} and "
                                 f"{n.name}; each tensor has one producer")
            writer[o] = n.name
    for key, t in tensors.items():
        if not isinstance(t, TensorInfo) or t.name != key:
            raise GraphError(f"tensors[{key!r}] must be the TensorInfo named {key!r}, "
                             f"not {t!r}")
        as_shape(t.shape, as_dtype(t.dtype, key), key)
        if t.kind not in _KINDS:
            raise GraphError(f"tensor {key!r} has unknown kind {t.kind!r}; kinds: "
                             f"{', '.join(_KINDS)}")
        if t.producer is None:
            if t.kind not in LEAF_KINDS:
                raise GraphError(f"{t.kind} {key!r} has no producer: only inputs, "
                                 "parameters and constants are leaves (name the node that "
                                 "writes it, or make it an input)")
            if key in writer:
                raise GraphError(f"{t.kind} {key!r} is written by node {writer[key]}")
            if t.kind == "const" and np.shape(t.value) != tuple(t.shape):
                raise GraphError(f"constant {key!r} needs a value of shape {list(t.shape)}")
        elif writer.get(key) != t.producer:
            found = f"node {writer[key]} writes it" if key in writer else "no node writes it"
            raise GraphError(f"tensor {key!r} names producer {t.producer!r}, but {found}")
        if t.alias_of is not None and t.alias_of not in tensors:
            raise GraphError(f"tensor {key!r} overwrites unknown tensor {t.alias_of!r}")


def toposort(nodes: list[Node], tensors: Mapping[str, TensorInfo]) -> list[Node]:
    """Kahn's algorithm, ties broken by the given order; names the cycle if there is one."""
    by_name: dict[str, Node] = {}
    for k, n in enumerate(nodes):
        if n.name in by_name:
            first = next(j for j, m in enumerate(nodes) if m.name == n.name)
            raise GraphError(f"two nodes are named {n.name!r} (nodes #{first} and #{k}); "
                             "each node needs a name of its own")
        by_name[n.name] = n
    producer = {}
    for n in nodes:
        for o in n.outputs:
            if o not in tensors:
                raise GraphError(f"node {n.name} writes tensor {o!r} that has no TensorInfo")
            producer[o] = n.name
    preds: dict[str, set[str]] = {n.name: set() for n in nodes}
    for n in nodes:
        for i in n.inputs:
            if i not in tensors:
                raise GraphError(f"node {n.name} reads unknown tensor {i!r}")
            if i in producer:
                preds[n.name].add(producer[i])
        for d in n.deps:
            if d not in by_name:
                raise GraphError(f"node {n.name} depends on unknown node {d!r}")
            preds[n.name].add(d)
    rank = {n.name: k for k, n in enumerate(nodes)}
    succs: dict[str, list[str]] = {n.name: [] for n in nodes}
    for v, ps in preds.items():
        for p in ps:
            succs[p].append(v)
    indeg = {v: len(ps) for v, ps in preds.items()}
    ready = [(rank[v], v) for v, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, v = heapq.heappop(ready)
        out.append(by_name[v])
        for s in succs[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, (rank[s], s))
    if len(out) < len(nodes):
        raise CycleError("the graph would have a cycle: " + " -> ".join(_find_cycle(preds)))
    return out


def _find_cycle(preds: dict[str, set[str]]) -> list[str]:
    """One cycle among the nodes left over by Kahn's algorithm (iterative DFS)."""
    color = dict.fromkeys(preds, 0)
    for root in preds:
        if color[root]:
            continue
        path, iters = [root], [iter(sorted(preds[root]))]
        color[root] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path.pop()] = 2
                iters.pop()
            elif color[nxt] == 1:
                return (path[path.index(nxt):] + [nxt])[::-1]
            elif color[nxt] == 0:
                color[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(preds[nxt])))
    return []
