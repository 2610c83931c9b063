"""Small graphs the DTR lesson and tests use: the uniform linear chain of the DTR paper,
a deep MLP training step, and random training graphs (for property tests)."""

from __future__ import annotations

import numpy as np

from ... import graph as _g
from ...autodiff import training_graph
from ...graph import Graph, name_scope, node_role
from ...ops import add, matmul, mean, mul, neg, relu, sigmoid, tanh


def linear_chain(n: int) -> Graph:
    """The DTR paper's uniform linear chain: n forward unit ops x_i = -x_{i-1}, then n
    backward unit ops g_{i-1} = g_i * x_{i-1} (g_n = x_n); every tensor has one element.
    Run it with `costs="unit"` and `alignment=1`: each tensor is 4 bytes, each op costs 1."""
    with name_scope():
        xs = [_g.input("x0", (1,))]
        for _ in range(n):
            xs.append(neg(xs[-1]))
        g = xs[-1]
        with node_role("backward"):
            for i in range(n, 0, -1):
                g = mul(g, xs[i - 1])
    return Graph([g], name=f"chain{n}")


def mlp_training(depth: int = 8, width: int = 32, batch: int = 16, lr: float = 0.1,
                 act: str = "relu") -> Graph:
    """A training step of a `depth`-layer MLP (matmul + bias + activation per layer)."""
    f = {"relu": relu, "tanh": tanh, "sigmoid": sigmoid}[act]
    with name_scope():
        x = _g.input("x", (batch, width))
        h, params = x, []
        for k in range(depth):
            W = _g.param(f"W{k}", (width, width))
            b = _g.param(f"b{k}", (width,), init="zeros")
            params += [W, b]
            h = f(add(matmul(h, W), b))
        loss = mean(h)
        return training_graph(loss, params, lr=lr, name=f"mlp{depth}")


def random_training_graph(seed: int, n_ops: int = 12, width: int = 8, batch: int = 4,
                          n_params: int = 3) -> Graph:
    """A random DAG of elementwise ops and matmuls over (batch, width) tensors, reduced
    to a scalar loss, differentiated and updated: a random *training* graph."""
    rng = np.random.default_rng(seed)
    with name_scope():
        x = _g.input("x", (batch, width))
        params = [_g.param(f"W{k}", (width, width)) for k in range(n_params)]
        pool = [x]
        used = set()
        for _ in range(n_ops):
            kind = rng.integers(0, 6)
            a = pool[int(rng.integers(0, len(pool)))]
            if kind == 0:
                w = params[int(rng.integers(0, n_params))]
                used.add(w.name)
                t = matmul(a, w)
            elif kind == 1:
                t = add(a, pool[int(rng.integers(0, len(pool)))])
            elif kind == 2:
                t = mul(a, pool[int(rng.integers(0, len(pool)))])
            elif kind == 3:
                t = tanh(a)
            elif kind == 4:
                t = relu(a)
            else:
                t = sigmoid(a)
            pool.append(t)
        for w in params:                # every parameter takes part
            if w.name not in used:
                pool.append(matmul(pool[-1], w))
        read = {id(i) for t in pool[1:] for i in t.call.inputs}
        sinks = [t for t in pool[1:] if id(t) not in read]   # the loss reads every sink
        loss = mean(sinks[0])
        for t in sinks[1:]:
            loss = add(loss, mean(t))
        return training_graph(loss, params, lr=0.05, name=f"random{seed}")


def feeds_for(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs and initial parameters for `graph`."""
    from ..executor import init_params
    rng = np.random.default_rng(seed)
    feeds = {t.name: rng.standard_normal(t.shape).astype(t.dtype)
             for t in graph.leaves("input")}
    feeds.update(init_params(graph, seed))
    return feeds
