"""Schedules: topological orders of a graph's nodes. `ORDERS` maps a name to a function.

A schedule changes every tensor's lifetime, so it changes the theoretical minimum;
choosing it well is GE's "topo optimisation" [Huawei GE, §2].
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import GraphError
from ..graph import Graph

Order = Callable[[Graph], list[str]]
ORDERS: dict[str, Order] = {}


def register_order(name: str) -> Callable[[Order], Order]:
    """A decorator that adds an order function to `ORDERS` under `name` (topo.py adds
    BFS, DFS, reverse DFS, GE's adjustment, the memory-greedy order and "best")."""
    def deco(fn: Order) -> Order:
        ORDERS[name] = fn
        return fn
    return deco


@register_order("program")
def program_order(graph: Graph) -> list[str]:
    """The order the program built the nodes in (the graph's own order)."""
    return [n.name for n in graph.nodes]


def schedule(graph: Graph, order: str = "program") -> list[str]:
    """The node names of `graph` in the named order."""
    try:
        fn = ORDERS[order]
    except (KeyError, TypeError):       # TypeError: an unhashable value such as a list
        raise GraphError(f"unknown order {order!r}; known: {', '.join(sorted(ORDERS))}") \
            from None
    return fn(graph)

