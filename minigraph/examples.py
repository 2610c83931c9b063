"""The source articles' worked examples as graphs, so lessons and tests quote the same numbers.

- MXNet's memory note [Chen 2016], in-place: three chained sigmoids that need one buffer
  (`sigmoid_chain`); the counter-example where B is also read by F, so C = sigmoid(B) may
  not overwrite B (`inplace_counterexample`); the two-layer perceptron whose act1, d(fc1)
  and d(fc2) go in place (`two_layer_mlp`); a step whose forward tensors no backward node
  reads (`free_after_forward`); parallel branches for the colouring heuristic (`branchy`).
- The GE memory-reuse blog [Huawei GE]: the CNN block Input -> Conv -> ReLU -> Pool
  (`cnn_block`; the layout the blog claims for it is `memory.instances.blog_cnn_layout`).
  The CANN article's worked example [Huawei GE] as a graph (`ge_worked_graph`).
- MODeL [Steiner 2023]: two branches that every heuristic order runs in the wrong order
  (`order_trap`).
- DTR [Kirisame 2021]: the uniform linear chain (`linear_chain`), a deep MLP training step
  (`mlp_training`) and random training graphs for property tests (`random_training_graph`).
- The online-allocator lesson: an MLP step with tensors of MiB size (`wide_mlp`).

Every builder works in a fresh `name_scope()`, so names (and numbers) never drift.
Random values to run them with: `minigraph.feeds.random_feeds`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import ops
from .autodiff import training_graph
from .graph import Graph, input, name_scope, node_role, param
from .models import mlp_graph, named

__all__ = ["named", "sigmoid_chain", "inplace_counterexample", "two_layer_mlp",
           "free_after_forward", "branchy", "cnn_block", "linear_chain", "mlp_training",
           "random_training_graph", "wide_mlp", "ge_worked_graph", "order_trap"]


# ---------------------------------------------------------------------------------------
# MXNet's memory note [Chen 2016]: in-place and sharing
# ---------------------------------------------------------------------------------------

def sigmoid_chain(n: int = 3, shape: tuple[int, ...] = (4, 8)) -> Graph:
    """A -> B = sigmoid(A) -> C = sigmoid(B) -> D = sigmoid(C) -> loss = sum(D).

    "Sigmoid can be computed in place, so a chain of any length needs one buffer". A is a
    graph input (never overwritten), so B takes fresh bytes and C, D, ... each take over
    their input's bytes; the scalar loss is the graph output.
    """
    with name_scope():
        t = input("A", shape)
        for k in range(n):
            t = named(ops.sigmoid(t), chr(ord("B") + k))
        return Graph([named(ops.sum(t), "loss")], name=f"sigmoid_chain_{n}")


def inplace_counterexample(shape: tuple[int, ...] = (4, 8), f_first: bool = False) -> Graph:
    """The counter-example: B = sigmoid(A) is read by C = sigmoid(B) *and* by F.

    In program order C runs before F, so when C runs B still has a reader to come: C may
    not overwrite B. With `f_first=True` F runs first, and then C is B's last reader.
    """
    with name_scope():
        a = input("A", shape)
        b = named(ops.sigmoid(a), "B")
        if f_first:
            f = named(ops.mul_scalar(b, 2.0), "F")
            c = named(ops.sigmoid(b), "C")
        else:
            c = named(ops.sigmoid(b), "C")
            f = named(ops.mul_scalar(b, 2.0), "F")
        g = named(ops.mul(c, f), "G")
        return Graph([named(ops.sum(g), "loss")], name="counterexample")


def two_layer_mlp(batch: int = 64, n_in: int = 784, hidden: int = 128,
                  classes: int = 10) -> tuple[Graph, dict[str, str]]:
    """The note's two-layer perceptron, as a training graph (forward, backward, update).

    Returns the graph and a map from the note's names (fc1, act1, fc2, d(fc2), d(act1),
    d(fc1), d(W1), d(W2)) to tensor names, found from the graph's structure.
    """
    g = mlp_graph((n_in, hidden, classes), batch, bias=False, mxnet_names=True, lr=0.1,
                  name="mlp2")
    names = {"fc1": "fc1", "act1": "act1", "fc2": "fc2"}
    for node in g.nodes:
        if node.op == "relu_grad":
            names["d(act1)"], names["d(fc1)"] = node.inputs[0], node.outputs[0]
        elif node.op == "softmax_cross_entropy_grad":
            names["d(fc2)"] = node.outputs[0]
        elif node.op == "sgd_update":
            names[f"d({node.inputs[0]})"] = node.inputs[1]
    return g, names


def free_after_forward(n: int = 1024) -> Graph:
    """C = A * B, F = C + B, loss = mean(F), as a training graph. No backward node reads
    C or F, so both are freed as soon as the forward pass is done."""
    with name_scope():
        A, B = param("A", (n,)), param("B", (n,))
        F = A * B + B
        return training_graph(ops.mean(F), [A, B], lr=0.1, name="free_after_forward")


def branchy(branches: int = 3, depth: int = 3, batch: int = 16, width: int = 32) -> Graph:
    """`branches` independent chains from one input, joined by add_n (forward only).

    Branch i is x @ W_i followed by `depth` activations (relu, tanh, sigmoid, ...). The
    branches could run in parallel; a plan that lets branch 2 reuse branch 1's bytes
    forbids that. The note's colouring keeps whole paths apart.
    """
    acts = (ops.relu, ops.tanh, ops.sigmoid, ops.exp)
    with name_scope():
        x = input("x", (batch, width))
        ends = []
        for i in range(branches):
            h = named(ops.matmul(x, param(f"W{i}", (width, width))), f"b{i}_mm")
            for k in range(depth):
                h = named(acts[(i + k) % len(acts)](h), f"b{i}_{k}")
            ends.append(h)
        y = named(ops.add_n(*ends), "join")
        return Graph([named(ops.sum(y), "loss")], name=f"branchy_{branches}x{depth}")


# ---------------------------------------------------------------------------------------
# The GE blog [Huawei GE]: the CNN block
# ---------------------------------------------------------------------------------------

def cnn_block(image: int = 224, channels: int = 64) -> Graph:
    """Input [1,3,224,224] -> Conv (64 filters 3x3, stride 2) -> ReLU -> MaxPool 2x2.

    The blog's sizes: input 3x224x224 (588 KiB in float32; the blog's "150KB" counts
    elements), conv and relu outputs 64x112x112 (3.06 MiB; the blog's "3.2 MB" is 10^6-byte
    MB), pool output 64x56x56 (784 KiB). The pool output is the graph output. The blog's
    layout for it: `memory.instances.blog_cnn_layout`; its tensors with their real lives:
    `memory.instances.cnn_block_buffers`.
    """
    with name_scope():
        x = input("input_0", (1, 3, image, image))
        w = param("conv1_w", (channels, 3, 3, 3))
        t1 = named(ops.conv2d(x, w, stride=2, padding=1), "conv1_out")
        t2 = named(ops.relu(t1), "relu1_out")
        t3 = named(ops.max_pool2d(t2, 2), "pool1_out")
        return Graph([t3], name="cnn_block")


def ge_worked_graph() -> Graph:
    """The CANN article's five tensors [Huawei GE] as matmuls of float32 tensors: A 1024 B,
    B 2048 B, C 1024 B, D 512 B, E 4096 B, alive in program order over the article's
    steps less one (A 0-1, B 1-3, C 2-3, D 3-4, E 4-5; `memory.instances.ge_worked_example`).
    C = y @ W_C reads only a graph input, so it is the one node an order may move."""
    with name_scope():
        x, y = input("x", (16, 4)), input("y", (32, 4))
        a = named(ops.matmul(x, param("W_A", (4, 16))), "A")
        b = named(ops.matmul(a, param("W_B", (16, 32))), "B")
        c = named(ops.matmul(y, param("W_C", (4, 8))), "C")
        d = named(ops.matmul(b, c), "D")
        e = named(ops.matmul(d, param("W_E", (8, 64))), "E")
        return Graph([named(ops.sum(e), "out")], name="ge_worked_graph")


# ---------------------------------------------------------------------------------------
# MODeL [Steiner 2023]: an order no heuristic finds
# ---------------------------------------------------------------------------------------

def order_trap(unit: int = 128) -> Graph:
    """Two branches from one input, joined by a concat (the graph output), sizes in units
    of `unit` float32s: R1 (1) -> R2 (3) and L1 (4) -> L2 (1). Built R first, so program,
    DFS, reverse DFS and GE's adjustment run R1 R2 L1 L2 (8 units alive at L2's step); BFS
    runs R1 L1 R2 L2 (8 at R2's); the memory-greedy order takes R1 first (it allocates
    least), then R2 (it frees R1): 8 again. L1 L2 R1 R2 needs 5."""
    with name_scope():
        x = input("x", (1, 8))
        r1 = named(ops.matmul(x, param("W_R1", (8, unit))), "R1")
        r2 = named(ops.matmul(r1, param("W_R2", (unit, 3 * unit))), "R2")
        l1 = named(ops.matmul(x, param("W_L1", (8, 4 * unit))), "L1")
        l2 = named(ops.matmul(l1, param("W_L2", (4 * unit, unit))), "L2")
        return Graph([named(ops.concat([r2, l2], axis=1), "J")], name="order_trap")


# ---------------------------------------------------------------------------------------
# DTR [Kirisame 2021]: the linear chain, a deep MLP, random training graphs
# ---------------------------------------------------------------------------------------

def linear_chain(n: int) -> Graph:
    """The DTR paper's uniform linear chain: n forward unit ops x_i = -x_{i-1}, then n
    backward unit ops g_{i-1} = g_i * x_{i-1} (g_n = x_n); every tensor has one element.
    Run it with `costs="unit"` and `alignment=1`: each tensor is 4 bytes, each op costs 1."""
    with name_scope():
        xs = [input("x0", (1,))]
        for _ in range(n):
            xs.append(ops.neg(xs[-1]))
        g = xs[-1]
        with node_role("backward"):
            for i in range(n, 0, -1):
                g = ops.mul(g, xs[i - 1])
    return Graph([g], name=f"chain{n}")


def mlp_training(depth: int = 8, width: int = 32, batch: int = 16, lr: float = 0.1,
                 act: str = "relu") -> Graph:
    """A training step of a `depth`-layer MLP of square layers, act(h @ W{k} + b{k}) for
    k = 0..depth-1 (the last layer too), and loss = mean(h)."""
    return mlp_graph((width,) * (depth + 1), batch, act=act, act_last=True, loss="mean",
                     first=0, lr=lr, name=f"mlp{depth}")


def random_training_graph(seed: int, n_ops: int = 12, width: int = 8, batch: int = 4,
                          n_params: int = 3) -> Graph:
    """A random DAG of elementwise ops and matmuls over (batch, width) tensors, reduced
    to a scalar loss, differentiated and updated: a random *training* graph."""
    rng = np.random.default_rng(seed)
    with name_scope():
        x = input("x", (batch, width))
        params = [param(f"W{k}", (width, width)) for k in range(n_params)]
        pool = [x]
        used = set()
        for _ in range(n_ops):
            kind = rng.integers(0, 6)
            a = pool[int(rng.integers(0, len(pool)))]
            if kind == 0:
                w = params[int(rng.integers(0, n_params))]
                used.add(w.name)
                t = ops.matmul(a, w)
            elif kind == 1:
                t = ops.add(a, pool[int(rng.integers(0, len(pool)))])
            elif kind == 2:
                t = ops.mul(a, pool[int(rng.integers(0, len(pool)))])
            elif kind == 3:
                t = ops.tanh(a)
            elif kind == 4:
                t = ops.relu(a)
            else:
                t = ops.sigmoid(a)
            pool.append(t)
        for w in params:                # every parameter takes part
            if w.name not in used:
                pool.append(ops.matmul(pool[-1], w))
        read = {id(i) for t in pool[1:] for i in t.call.inputs}
        sinks = [t for t in pool[1:] if id(t) not in read]   # the loss reads every sink
        loss = ops.mean(sinks[0])
        for t in sinks[1:]:
            loss = ops.add(loss, ops.mean(t))
        return training_graph(loss, params, lr=0.05, name=f"random{seed}")


# ---------------------------------------------------------------------------------------
# Online allocators: an MLP step with MiB-sized tensors
# ---------------------------------------------------------------------------------------

def wide_mlp(widths: Sequence[int] = (1024, 4096, 1024, 2048, 512), batch: int = 256,
             name: str = "mlp") -> Graph:
    """A training graph with tensors of MiB size and mixed widths (so sizes differ and
    holes appear): `widths[0]` inputs, ReLU hidden layers, mean-square loss, no biases.
    Built only symbolically; no array is made."""
    return mlp_graph(widths, batch, bias=False, loss="square", first=0, lr=0.01, name=name)
