"""The gradient pass, MXNet/nnvm style: it appends explicit backward *nodes* to the graph.

Walk the forward nodes in reverse program order. Each node's gradient rule (in ops/)
turns the gradients of its outputs into gradient contributions for its inputs, as new
nodes. When a tensor feeds several consumers, its contributions are summed by one
aggregation node (`add_n`) - never by a split layer in the forward pass [Chen 2016].
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from .errors import ArgumentError, GradError
from .graph import Call, Graph, Tensor, constant, node_role
from .ops.elementwise import add_n
from .ops.registry import get_op
from .ops.update import sgd_update


def _calls_between(loss: Tensor, wrt: Sequence[Tensor]) -> tuple[list[Call], set[int]]:
    """Calls on a path from some `wrt` tensor to `loss`, in program order; and the ids
    of tensors that depend on `wrt` (only those get gradients)."""
    calls: dict[int, Call] = {}
    stack = [loss]
    while stack:
        t = stack.pop()
        if t.call is not None and id(t.call) not in calls:
            calls[id(t.call)] = t.call
            stack.extend(t.call.inputs)
    ordered = sorted(calls.values(), key=lambda c: c.seq)
    depends = {id(t) for t in wrt}
    for c in ordered:
        if any(id(i) in depends for i in c.inputs):
            depends.update(id(o) for o in c.outputs)
    return [c for c in ordered if any(id(o) in depends for o in c.outputs)], depends


def grad(loss: Tensor, wrt: Sequence[Tensor]) -> list[Tensor]:
    """Gradients of scalar `loss` with respect to each tensor in `wrt`, as new graph nodes."""
    if not isinstance(loss, Tensor):
        raise GradError(f"grad: loss must be a Tensor, got {type(loss).__name__}")
    if loss.size != 1:
        raise GradError(f"grad: the loss must be a scalar, but {loss.spec()} has "
                        f"{loss.size} elements; reduce it first (mg.sum or mg.mean)")
    for w in wrt:
        if np.dtype(w.dtype).kind != "f":
            raise GradError(f"grad: {w.name} has dtype {w.dtype}; only floating tensors "
                            "have gradients")
    if not wrt:
        raise GradError(f"grad: no tensors to differentiate {loss.name} with respect to "
                        "(wrt is empty)")
    calls, depends = _calls_between(loss, wrt)
    if id(loss) not in depends:
        raise GradError(f"grad: {loss.name} does not depend on "
                        f"{', '.join(w.name for w in wrt)}")
    contribs: dict[int, list[Tensor]] = {}
    with node_role("backward"):
        contribs[id(loss)] = [constant(np.ones(loss.shape, dtype=loss.dtype),
                                       name=f"d_{loss.name}", dtype=loss.dtype)]
        for c in reversed(calls):
            out_grads = [_aggregate(contribs.pop(id(o), [])) for o in c.outputs]
            if all(g is None for g in out_grads):
                continue
            d = get_op(c.op)
            wanted = [k for k, t in enumerate(c.inputs) if id(t) in depends
                      and (d.differentiable is None or k in d.differentiable)]
            if not wanted:
                continue
            if d.grad is None:
                raise GradError(f"grad: op {c.op} (node {c.name}) has no gradient rule, "
                                f"but {c.inputs[wanted[0]].name} needs one")
            in_grads = d.grad(c.attrs, c.inputs, c.outputs, out_grads)
            for k in wanted:
                if in_grads[k] is not None:
                    contribs.setdefault(id(c.inputs[k]), []).append(in_grads[k])
        result = []
        for w in wrt:
            g = _aggregate(contribs.get(id(w), []))
            if g is None:
                raise GradError(f"grad: {loss.name} does not depend on {w.name}")
            result.append(g)
    return result


def _aggregate(gs: list[Tensor]) -> Tensor | None:
    """One gradient from its contributions: itself, or one `add_n` aggregation node."""
    return add_n(*gs) if gs else None


def training_graph(loss: Tensor, params: Sequence[Tensor], lr: float = 0.1,
                   name: str = "training") -> Graph:
    """Forward + explicit backward + SGD update nodes (`W_new = W - lr*dW`) as one graph
    (`sgd_updates`). `lr` must be a finite number and `params` not empty (ArgumentError,
    GradError)."""
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not math.isfinite(lr):
        raise ArgumentError(f"training_graph: lr (the learning rate) must be a finite "
                            f"number, not {lr!r}")
    if not params:
        raise GradError(f"training_graph: no parameters to update: params is empty (the "
                        f"loss {getattr(loss, 'name', loss)!r} needs at least one mg.param)")
    grads = grad(loss, params)
    return Graph([loss, *sgd_updates(loss, params, grads, lr)], name=name)


def sgd_updates(loss: Tensor, params: Sequence[Tensor], grads: Sequence[Tensor],
                lr: float) -> list[Tensor]:
    """`W_new = W - lr*dW` per parameter, each after every other reader of its parameter
    on the way to `loss` and `grads` (it overwrites the parameter in place)."""
    readers: dict[int, list[Tensor]] = {id(p): [] for p in params}
    stack, seen = [loss, *grads], set()
    while stack:
        t = stack.pop()
        c = t.call
        if c is None or id(c) in seen:
            continue
        seen.add(id(c))
        for i in c.inputs:
            if id(i) in readers:
                readers[id(i)].append(c.outputs[0])
        stack.extend(c.inputs)
    return [sgd_update(p, g, lr, readers=readers[id(p)]) for p, g in zip(params, grads)]
