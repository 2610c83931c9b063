# %% [markdown]
# # 01 · Graphs and the explicit backward graph
#
# **Goal.** Build a computation graph from symbolic tensors, look at it, and derive its
# backward pass as *more graph nodes* (not a tape, not hidden closures). Then check the
# gradients against finite differences, and see why an explicit backward graph is what
# makes memory planning possible: every tensor of the training step, gradients included,
# is visible before anything runs.
#
# **Source.** MXNet's memory design note [Chen 2016]: the backward pass as an explicit graph,
# gradient aggregation by one summation node instead of split layers. The code, in this
# order: `minigraph/tensor.py` (building with symbolic tensors), `minigraph/graph.py` (the
# frozen graph), `minigraph/ops/registry.py` (what an op is: shape rule, kernel, gradient
# rule) with each op's `grad=` rule in `minigraph/ops/`, and `minigraph/autodiff.py` (the
# gradient pass).

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

import numpy as np

from minigraph.lessons import check_answers, l01

# %% [markdown]
# ## 1. Symbolic tensors
#
# `mg.input` and `mg.param` make leaves; every operation makes a node whose output is a new
# symbolic tensor. Shapes are inferred at once, so a mismatch fails on the line that
# caused it. Nothing is computed yet.

# %%
with mg.name_scope():
    x = mg.input("x", (4, 3))
    W = mg.param("W", (3, 2))
    h = x @ W
    s = mg.sigmoid(h)
    loss = mg.mean(s * h)          # h is read twice: by sigmoid and by the product
print(loss)
try:
    x @ mg.param("V", (4, 2))       # 3 != 4: the error names the operands and shapes
except mg.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# ## 2. The forward graph
#
# `mg.Graph(outputs)` freezes everything the outputs depend on into plain data: nodes in a
# topological order, tensors by name, who consumes what.

# %%
forward = mg.Graph(loss, name="forward")
print(forward)
print("consumers of the matmul's output:", forward.consumers["matmul_0"])

# %%
mg.draw(forward)

# %% [markdown]
# ## 3. The backward pass is more nodes
#
# `mg.grad(loss, [W])` walks the forward nodes in reverse and applies each op's gradient
# rule, which builds *ordinary nodes* (role "backward"). Where a tensor feeds two
# consumers (here `h`), its two gradient contributions are summed by one `add_n` node:
# MXNet's way, instead of a "split" layer in the forward graph.

# %%
with mg.name_scope():
    x = mg.input("x", (4, 3))
    W = mg.param("W", (3, 2))
    h = x @ W
    loss = mg.mean(mg.sigmoid(h) * h)
    (dW,) = mg.grad(loss, [W])
both = mg.Graph([loss, dW], name="forward+backward")
print(both)
print("aggregation nodes:", [n.name for n in both.nodes if n.op == "add_n"])
seed = next(t for t in both.tensors.values() if t.kind == "const")
print(f"the seed: {seed.name}, kind {seed.kind}, shape {seed.shape}, value "
      f"{float(seed.value)}")

# %% [markdown]
# The backward pass needs somewhere to start: the gradient of the loss with respect to
# itself, which is 1. `mg.grad` makes it a constant tensor of ones named `d_` + the
# loss's name (printed above), the **seed**; every gradient rule then multiplies its way
# back from it. In the drawing below it is the grey note-shaped leaf (a constant) that
# feeds the first backward node.

# %%
mg.draw(both)

# %% [markdown]
# ## 4. A training step: forward + backward + update
#
# `training_graph` adds one SGD update per parameter (`W_new = W - lr * dW`, written over
# `W` in place, after every other reader of `W`). Running this graph once is one step.
#
# "After every other reader" is an order no tensor expresses: the update does not read
# the matmul's output, it only must not overwrite W before the matmuls have read it. The
# graph records it as a *control dependency* (`node.deps`), drawn as a **dashed grey
# edge** with a hollow arrowhead: no data flows along it, it only orders two nodes. The
# cell prints each one.

# %%
with mg.name_scope():
    x = mg.input("x", (4, 3))
    W = mg.param("W", (3, 2))
    h = x @ W
    loss = mg.mean(mg.sigmoid(h) * h)
    step = mg.training_graph(loss, [W], lr=0.5)
print(step)
for n in step.nodes:
    for d in n.deps:
        print(f"dashed edge: {d} -> {n.name} ({n.name} runs after {d}, which reads "
              f"{', '.join(t for t in step.node(d).inputs if t in n.inputs)})")
assert any(n.deps for n in step.nodes)
mg.draw(step)

# %% [markdown]
# ## 5. Run it, and check the gradient
#
# The executor runs the nodes in order on NumPy. We compare the analytic gradient (the
# backward nodes) with central finite differences of the loss.

# %%
rng = np.random.default_rng(0)
xv = rng.standard_normal((4, 3)).astype("float64")
Wv = rng.standard_normal((3, 2)).astype("float64")

with mg.name_scope():
    x = mg.input("x", (4, 3), dtype="float64")
    W = mg.param("W", (3, 2), dtype="float64")
    h = x @ W
    loss = mg.mean(mg.sigmoid(h) * h)
    (dW,) = mg.grad(loss, [W])
g64 = mg.Graph([loss, dW])
run = mg.Executor(g64, device="cpu").run
out = run(x=xv, W=Wv)
analytic = out[dW.name]


def loss_at(Wtry):
    return float(run(x=xv, W=Wtry)[loss.name])


eps = 1e-6
numeric = np.zeros_like(Wv)
for i in np.ndindex(Wv.shape):
    up, down = Wv.copy(), Wv.copy()
    up[i] += eps
    down[i] -= eps
    numeric[i] = (loss_at(up) - loss_at(down)) / (2 * eps)
print("analytic dW:\n", analytic)
print("largest difference to finite differences:", np.abs(analytic - numeric).max())

# %% [markdown]
# ## 6. Why this matters for memory
#
# Because the backward pass is part of the graph, every tensor of a training step has a
# producer and known readers before anything runs. Each tensor's life is known, and so is
# the most bytes alive at one step. Lesson 02 computes those lives; here is the preview:

# %%
live = mg.liveness(step, alignment=1)
print(live.table())
print(live)

# %% [markdown]
# ## Exercises
#
# **1.** With `h = x @ W` and `s = mg.sigmoid(h)` (x and W as above), build
# `loss = mg.mean(s * h + s)`. How many `add_n` aggregation nodes does `mg.grad(loss, [W])`
# create? Think first, then build it and look. Put the number in `ANSWER_1`.
#
# **2.** In the `step` graph of section 4, how many backward nodes read a forward
# activation (a tensor whose `kind` is `"activation"`)? Each such read keeps that
# activation alive into the backward pass. Count them with code, from `step.nodes` and
# `step.tensors`, and put the number in `ANSWER_2`.

# %%
ANSWER_1 = None
ANSWER_2 = None

# %%
check_answers({1: (ANSWER_1, l01.exercise_1), 2: (ANSWER_2, l01.exercise_2)})

# %% [markdown]
# ## Summary
#
# - A graph is plain data: nodes by name, tensors with shapes and dtypes, consumers.
# - The gradient pass appends backward nodes built from each op's gradient rule; a tensor
#   read twice gets one `add_n` aggregation node (no split layers).
# - A training step is forward + backward + update in one graph, run by one executor.
# - Every tensor's life is known before running: the basis of every memory plan in the
#   lessons that follow (02: liveness).
