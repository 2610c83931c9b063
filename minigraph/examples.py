"""The seeds' worked examples as graphs, so lessons and tests quote the same numbers.

- seed 004 (MXNet's memory note): three chained sigmoids that need one buffer in place
  (`sigmoid_chain`); the counter-example where B is also read by F, so C = sigmoid(B) may
  not overwrite B (`inplace_counterexample`); the two-layer perceptron whose act1, d(fc1)
  and d(fc2) go in place (`two_layer_mlp`); and a graph of parallel branches for the
  colouring heuristic (`branchy`).
- seed 000 (the GE blog): the CNN block Input -> Conv -> ReLU -> Pool (`cnn_block`), and
  the layout the blog claims for it (`blog_cnn_layout`), in which the pooling output sits
  on the bytes of its own input. The validator rejects that layout: pooling reads
  relu1_out while it writes pool1_out.

Every builder works in a fresh `name_scope()`, so names (and numbers) never drift.
"""

from __future__ import annotations

import numpy as np

from . import ops
from .autodiff import training_graph
from .graph import Graph, Tensor, input, name_scope, param
from .memory.buffers import Buffer
from .memory.liveness import liveness


def named(t: Tensor, name: str) -> Tensor:
    """Give an op's output (and its node) the name a seed's figure uses."""
    t.name = name
    t.call.name = name
    return t


# ---------------------------------------------------------------------------------------
# Seed 004: in-place
# ---------------------------------------------------------------------------------------

def sigmoid_chain(n: int = 3, shape: tuple[int, ...] = (4, 8)) -> Graph:
    """A -> B = sigmoid(A) -> C = sigmoid(B) -> D = sigmoid(C) -> loss = sum(D).

    Seed 004: "sigmoid can be computed in place, so a chain of any length needs one
    buffer". A is a graph input (never overwritten), so B takes fresh bytes and C, D, ...
    each take over their input's bytes; the scalar loss is the graph output.
    """
    with name_scope():
        t = input("A", shape)
        for k in range(n):
            t = named(ops.sigmoid(t), chr(ord("B") + k))
        return Graph([named(ops.sum(t), "loss")], name=f"sigmoid_chain_{n}")


def inplace_counterexample(shape: tuple[int, ...] = (4, 8), f_first: bool = False) -> Graph:
    """Seed 004's counter-example: B = sigmoid(A) is read by C = sigmoid(B) *and* by F.

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
    """Seed 004's two-layer perceptron, as a training graph (forward, backward, update).

    Returns the graph and a map from the seed's names (fc1, act1, fc2, d(fc2), d(act1),
    d(fc1), d(W1), d(W2)) to tensor names, found from the graph's structure.
    """
    with name_scope():
        data = input("data", (batch, n_in))
        label = input("label", (batch,), dtype="int64")
        w1 = param("W1", (n_in, hidden))
        w2 = param("W2", (hidden, classes))
        fc1 = named(ops.matmul(data, w1), "fc1")
        act1 = named(ops.relu(fc1), "act1")
        fc2 = named(ops.matmul(act1, w2), "fc2")
        loss = named(ops.softmax_cross_entropy(fc2, label), "loss")
        g = training_graph(loss, [w1, w2], lr=0.1, name="mlp2")
    names = {"fc1": "fc1", "act1": "act1", "fc2": "fc2"}
    for node in g.nodes:
        if node.op == "relu_grad":
            names["d(act1)"], names["d(fc1)"] = node.inputs[0], node.outputs[0]
        elif node.op == "softmax_cross_entropy_grad":
            names["d(fc2)"] = node.outputs[0]
        elif node.op == "sgd_update":
            names[f"d({node.inputs[0]})"] = node.inputs[1]
    return g, names


# ---------------------------------------------------------------------------------------
# Seed 000: the CNN block and the layout the blog claims for it
# ---------------------------------------------------------------------------------------

def cnn_block(image: int = 224, channels: int = 64) -> Graph:
    """Input [1,3,224,224] -> Conv (64 filters 3x3, stride 2) -> ReLU -> MaxPool 2x2.

    The blog's sizes: input 3x224x224, conv and relu outputs 64x112x112 (3.2 MB in
    float32), pool output 64x56x56 (0.8 MB). The pool output is the graph output.
    """
    with name_scope():
        x = input("input_0", (1, 3, image, image))
        w = param("conv1_w", (channels, 3, 3, 3))
        t1 = named(ops.conv2d(x, w, stride=2, padding=1), "conv1_out")
        t2 = named(ops.relu(t1), "relu1_out")
        t3 = named(ops.max_pool2d(t2, 2), "pool1_out")
        return Graph([t3], name="cnn_block")


def blog_cnn_layout(graph: Graph, alignment: int = 1
                    ) -> tuple[list[Buffer], dict[str, int], list[tuple[str, str]]]:
    """The blog's layout as buffers and offsets: every activation at offset 0
    (relu1_out in place of conv1_out, pool1_out "reusing" conv1_out's memory).

    The pool output is a graph output and so not planned here; to test the blog's claim
    it is put in the arena anyway, with its true lifetime. Check it with
    `validate_offsets(buffers, offsets, handovers=pairs)`.
    """
    live = liveness(graph, alignment=alignment)
    names = ("conv1_out", "relu1_out", "pool1_out")
    buffers = [Buffer(n, live.intervals[n].start, live.intervals[n].end,
                      live.intervals[n].bytes) for n in names]
    return buffers, dict.fromkeys(names, 0), [("conv1_out", "relu1_out")]


# ---------------------------------------------------------------------------------------
# Seed 004: parallel branches, for the colouring heuristic
# ---------------------------------------------------------------------------------------

def branchy(branches: int = 3, depth: int = 3, batch: int = 16, width: int = 32) -> Graph:
    """`branches` independent chains from one input, joined by add_n (forward only).

    Branch i is x @ W_i followed by `depth` activations (relu, tanh, sigmoid, ...). The
    branches could run in parallel; a plan that lets branch 2 reuse branch 1's bytes
    forbids that. Seed 004's colouring keeps whole paths apart.
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


def feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Small random values for every input and parameter of an example graph (integer
    inputs, like labels, get class indices below the last axis of the loss's logits)."""
    from .runtime.executor import init_params
    rng = np.random.default_rng(seed)
    out = {}
    for t in graph.leaves("input"):
        if np.dtype(t.dtype).kind in "iu":
            n = max((graph.tensors[c].shape[-1] for n in graph.consumers[t.name]
                     for c in graph.node(n).inputs if graph.tensors[c].kind == "activation"
                     and graph.tensors[c].shape), default=2)
            out[t.name] = rng.integers(0, n, t.shape).astype(t.dtype)
        else:
            out[t.name] = rng.standard_normal(t.shape).astype(t.dtype)
    return {**out, **init_params(graph, seed)}
