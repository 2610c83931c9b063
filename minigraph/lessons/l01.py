"""Exercise checks of lesson 01 (graphs and the explicit backward graph).

Each `exercise_N(answer)` returns (right?, why); the lesson's check cell hands them to
`check_answers`. The expected value is computed here, out of the student's sight, and a
wrong answer gets a hint that does not give the answer away.
"""

from __future__ import annotations

from typing import Any

from ..autodiff import grad, training_graph
from ..graph import Graph, input, name_scope, param  # noqa: A004 (minigraph's input)
from ..ops import mean, sigmoid


def _count(answer: Any) -> int | None:
    """The answer as a whole number, or None when it is not one (a string, 2.5, True)."""
    if isinstance(answer, bool):
        return None
    try:
        n = int(answer)
    except (TypeError, ValueError):
        return None
    return n if n == answer else None


def _aggregation_nodes() -> int:
    """`add_n` nodes of mg.grad for loss = mean(s * h + s), h = x @ W, s = sigmoid(h):
    h is read twice (sigmoid, mul) and so is s (mul, add) [Chen 2016]."""
    with name_scope():
        x = input("x", (4, 3))
        W = param("W", (3, 2))
        h = x @ W
        s = sigmoid(h)
        loss = mean(s * h + s)
        (dW,) = grad(loss, [W])
    return sum(1 for node in Graph([dW]).nodes if node.op == "add_n")


def exercise_1(answer: Any) -> tuple[bool, str]:
    """How many add_n aggregation nodes does mg.grad build for mean(s * h + s)?"""
    n = _count(answer)
    if n is None:
        return False, f"{answer!r} is not a whole number of nodes"
    if n == _aggregation_nodes():
        return True, "one add_n for every tensor that two nodes read (h and s)"
    return False, ("count the forward tensors that more than one node reads: each gets "
                   "exactly one add_n; `print(mg.Graph([dW]))` lists the nodes")


def lesson_step() -> Graph:
    """The training step of the lesson's section 4 (same names, same shapes)."""
    with name_scope():
        x = input("x", (4, 3))
        W = param("W", (3, 2))
        h = x @ W
        loss = mean(sigmoid(h) * h)
        return training_graph(loss, [W], lr=0.5)


def _backward_readers_of_activations(step: Graph) -> int:
    """Backward nodes of `step` that read a forward activation: each such read keeps the
    activation alive from the forward pass into the backward pass."""
    return sum(1 for node in step.nodes if node.role == "backward"
               and any(step.tensors[i].kind == "activation" for i in node.inputs))


def exercise_2(answer: Any) -> tuple[bool, str]:
    """How many backward nodes of the lesson's `step` read a forward activation?"""
    n = _count(answer)
    if n is None:
        return False, f"{answer!r} is not a whole number of nodes"
    if n == _backward_readers_of_activations(lesson_step()):
        return True, ("each of them keeps a forward activation alive into the backward "
                      "pass: those are the long lives of the liveness table")
    return False, ("look at every node with role 'backward' and the kind of its inputs "
                   "(`step.tensors[name].kind`): inputs, parameters and gradients do not "
                   "count, only kind 'activation'; a node counts once")
