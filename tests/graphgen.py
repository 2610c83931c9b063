"""Random graphs for property tests (importable by any test file).

`random_graph(seed, n_ops)` builds a DAG with real ops: in-place capable ones (relu,
sigmoid, tanh, exp, neg, add/mul/sub, scalar ops, add_n, reshape) mixed with ones that are
not (matmul, sum, mean, transpose, broadcast_to); tensors with several consumers; random
sizes; several graph outputs, some of which are also read by later ops. With
`train=True` a scalar loss is appended and the graph becomes a training graph (forward +
explicit backward + sgd updates). Everything is decided by `random.Random(seed)`, so a
failing example is a (seed, n_ops) pair that rebuilds the same graph.

`graphs()` is the hypothesis strategy; `feeds_for(graph, seed)` gives inputs and
parameters; `chain_graph(n)` builds a long plain-data chain fast (Graph.from_nodes).
"""

from __future__ import annotations

import random

import numpy as np

import minigraph as mg
from minigraph.graph import Graph, Node, TensorInfo

UNARY = ("relu", "sigmoid", "tanh", "exp", "neg")
BINARY = ("add", "mul", "sub")


def _dims(rng: random.Random) -> tuple[int, int]:
    big = rng.random() < 0.2          # a few tensors larger than 512 bytes
    hi = 40 if big else 8
    return rng.randint(1, hi), rng.randint(1, hi)


def random_graph(seed: int, n_ops: int = 30, train: bool = False) -> Graph:
    """A random DAG of about `n_ops` ops (see the module docstring)."""
    rng = random.Random(seed)
    with mg.name_scope():
        r0, c0 = _dims(rng)
        pool: list[mg.Tensor] = [mg.input("x0", (r0, c0))]
        params: list[mg.Tensor] = []
        for k in range(rng.randint(0, 2)):
            pool.append(mg.input(f"x{k + 1}", _dims(rng)))
        for k in range(rng.randint(0, 2)):
            p = mg.param(f"W{k}", _dims(rng))
            pool.append(p)
            params.append(p)
        made: list[mg.Tensor] = []

        def pick(pred=lambda t: True) -> mg.Tensor | None:
            cands = [t for t in pool if pred(t)]
            if not cands:
                return None
            # favour recent tensors (chains, in-place hand-overs) but reach back often
            # enough that many tensors get several consumers
            if rng.random() < 0.6:
                return cands[-rng.randint(1, min(3, len(cands)))]
            return rng.choice(cands)

        while len(made) < n_ops:
            kind = rng.random()
            x = pick()
            if kind < 0.35:
                y = getattr(mg, rng.choice(UNARY))(x)
            elif kind < 0.45:
                c = rng.choice((0.5, 2.0, -1.0))
                y = mg.ops.add_scalar(x, c) if rng.random() < 0.5 else mg.ops.mul_scalar(x, c)
            elif kind < 0.62:
                op = rng.choice(BINARY)
                other = pick(lambda t, x=x: t.shape == x.shape)
                if rng.random() < 0.25 and len(x.shape) == 2:   # a broadcast row or column
                    row = pick(lambda t, x=x: t.shape in ((1, x.shape[1]), (x.shape[0], 1)))
                    other = row if row is not None else other
                y = getattr(mg, op)(x, other)
            elif kind < 0.68:
                # operands may repeat (add_n(g, g, g) is what autodiff makes of x + x + x)
                same = [t for t in pool if t.shape == x.shape]
                y = mg.add_n(x, *(rng.choice(same) for _ in range(rng.randint(1, 3))))
            elif kind < 0.78:
                if len(x.shape) != 2:
                    continue
                b = pick(lambda t, x=x: len(t.shape) == 2 and t.shape[0] == x.shape[1])
                if b is None or rng.random() < 0.3:
                    b = mg.param(f"W{len(params)}", (x.shape[1], rng.randint(1, 40)))
                    params.append(b)
                y = mg.matmul(x, b)
            elif kind < 0.84:
                axis = rng.choice((None, 0, -1)) if x.shape else None
                keep = rng.random() < 0.5 and axis is not None
                y = (mg.sum if rng.random() < 0.6 else mg.mean)(x, axis=axis, keepdims=keep)
            elif kind < 0.90:
                if x.size <= 1:
                    continue
                y = mg.reshape(x, (x.size,) if len(x.shape) != 1 else (1, x.size))
            elif kind < 0.95:
                if len(x.shape) != 2:
                    continue
                y = mg.transpose(x)
            else:
                if len(x.shape) != 2 or x.shape[0] != 1:
                    continue
                y = mg.broadcast_to(x, (rng.randint(2, 6), x.shape[1]))
            if y is x:
                continue
            pool.append(y)
            made.append(y)
        # Every op stays reachable: each sink (a tensor nobody reads) is either a graph
        # output or summed into a scalar `total`; a few other tensors are outputs too, so
        # some graph outputs are also read by later ops.
        read = {id(i) for t in made for i in t.call.inputs}
        sinks = [t for t in made if id(t) not in read]
        direct = [t for t in sinks if not train and rng.random() < 0.4]
        summed = [t for t in sinks if all(t is not d for d in direct)]
        total = None
        for t in summed:
            total = mg.sum(t) if total is None else mg.add(total, mg.sum(t))
        extra = rng.sample(made, min(len(made), rng.randint(0, 2))) if not train else []
        outs = ([total] if total is not None else []) + direct + \
            [t for t in extra if all(t is not d for d in direct)]
        if not train:
            return Graph(outs, name=f"random_{seed}")
        wrt = [p for p in params if _depends(total, p)]
        if not wrt:
            return Graph([total], name=f"random_{seed}")
        return mg.training_graph(total, wrt, lr=0.01, name=f"random_train_{seed}")


def _depends(t: mg.Tensor, p: mg.Tensor) -> bool:
    stack, seen = [t], set()
    while stack:
        u = stack.pop()
        if u is p:
            return True
        if u.call is not None and id(u.call) not in seen:
            seen.add(id(u.call))
            stack.extend(u.call.inputs)
    return False


def feeds_for(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Values for every input and parameter (small, so exp stays finite mostly)."""
    rng = np.random.default_rng(seed)
    return {t.name: (rng.standard_normal(t.shape) * 0.5).astype(t.dtype)
            for t in graph.leaves("input", "param")}


def graphs(max_ops: int = 60, train: bool | None = None):
    """Hypothesis strategy: a random graph of 1..max_ops ops (training graph or not)."""
    from hypothesis import strategies as st
    trains = st.just(train) if train is not None else st.booleans()
    return st.builds(random_graph, st.integers(0, 2**32 - 1), st.integers(1, max_ops), trains)


def chain_graph(n: int, width: int = 64, skip: int = 3) -> Graph:
    """A ladder of `n` relu/add nodes built as plain data (fast for big sizes): node k
    reads node k-1 and, every `skip` nodes, also node k-skip (long-lived tensors)."""
    tensors = {"x": TensorInfo("x", (width,), "float32", "input")}
    nodes = []
    prev = "x"
    for k in range(n):
        name = f"t{k}"
        if skip and k >= skip and k % skip == 0:
            nodes.append(Node(name, "add", (), (prev, f"t{k - skip}"), (name,)))
        else:
            nodes.append(Node(name, "relu", (), (prev,), (name,)))
        tensors[name] = TensorInfo(name, (width,), "float32", "activation", producer=name)
        prev = name
    return Graph.from_nodes(nodes, tensors, [prev], name=f"chain_{n}")


def bytes_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Bit-for-bit equality of two run results, except that any NaN equals any NaN.

    NumPy can return a different NaN for the same inputs depending on aliasing: for 0-d
    arrays `np.add(x, y, out=x)` returns y's NaN when both are NaN, `np.add(x, y, out=z)`
    x's (found by the property tests: +nan vs -nan). Every other bit must match.
    """
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if x.dtype.kind in "fc":
            nan = np.isnan(x)
            if not np.array_equal(nan, np.isnan(y)):
                return False
            x, y = np.where(nan, 0, x), np.where(nan, 0, y)
        if x.tobytes() != y.tobytes():
            return False
    return True


# --- the differential fuzz: random (graph, planner, order, options) cases ---------------------

FUZZ_LIMITS = {"time_limit": 0.05, "iterations": 20, "node_limit": 500, "seed": 0}


def fuzz_case(i: int, max_ops: int = 12) -> tuple[str, str]:
    """Case `i` of the differential fuzz: a random graph of 1..`max_ops` ops (a training
    graph one time in three), planned with planner, order, in-place, colours and alignment
    picked in turn; the arena run must equal the no-reuse run bit for bit. Returns (the
    case in words, "" or what went wrong). Deterministic in `i`."""
    from minigraph.memory import planners
    from minigraph.memory.orders import ORDERS
    names, orders = sorted(planners.PLANNERS), sorted(ORDERS)
    rng = random.Random(i)
    seed, n_ops, train = rng.getrandbits(32), rng.randint(1, max_ops), i % 3 == 0
    planner = names[i % len(names)]
    order = orders[(i // len(names)) % len(orders)]
    opts = mg.MemoryOptions(inplace=rng.random() < 0.5, planner=planner,
                            colors=rng.choice((1, 1, 2, 3)), order=order,
                            alignment=rng.choice((1, 3, 6, 8, 512)),
                            planner_args=planners.options_for(planner, FUZZ_LIMITS))
    case = (f"random_graph({seed}, {n_ops}, {train}) planner={planner} order={order} "
            f"inplace={opts.inplace} colors={opts.colors} alignment={opts.alignment}")
    try:
        g = random_graph(seed, n_ops, train)
        feeds = feeds_for(g, seed)
        reference = mg.Executor(g, device="cpu").run(feeds)
        plan = mg.plan_memory(g, opts).plan
        got = mg.Executor(g, plan, device="cpu").run(feeds)
    except mg.MinigraphError as e:
        return case, f"{type(e).__name__}: {e}"
    return case, "" if bytes_equal(reference, got) else "arena run differs from no reuse"
