# %% [markdown]
# # Assignment 1 · Liveness and the theoretical minimum
#
# **Task.** Write `my_liveness(graph, schedule, alignment)`. It returns a pair
# `(intervals, minimum)`:
#
# * `intervals`: a dict from **every** tensor name of the graph to `(start, end, bytes)`;
# * `minimum`: the theoretical minimum of the schedule, in bytes.
#
# Everything a memory planner does starts here: a planner only ever sees these intervals
# (assignment 2), and the minimum is the number every plan is measured against.
#
# **Background (the sources).**
# * The GE blog [Huawei GE, blog §3] defines a tensor's *active interval*
#   `[s_i, e_i]`: `s_i` is the step that produces it, `e_i` the last step that consumes it.
#   Graph inputs start at step 0 and graph outputs end at the last step.
# * The CANN article [Huawei GE] defines the *theoretical minimum*: walk the steps, add a
#   tensor's bytes where its life begins, subtract them where it ends; the largest total
#   is the minimum (4608 B against 8704 B without reuse in its example). Sizes are
#   rounded up to 512 bytes in GE.
# * Chainer-Opt [Sekiyama 2018] draws the same thing as rectangles: time on x, address on y.
# * MXNet [Chen 2016] is why a training graph has so many tensors: the backward pass is
#   ordinary nodes, and every gradient is a tensor with its own interval.
#
# **The rules** (minigraph's, which the grader uses):
#
# | tensor | start | end | bytes |
# |---|---|---|---|
# | input, parameter, constant (no producer) | 0 | last step | its bytes, rounded up |
# | produced by a node | the step of that node | the step of its last reader | its bytes, rounded up |
# | ... and a graph output | the step of that node | the last step | its bytes, rounded up |
# | ... and read by nobody | the step of that node | the same step | its bytes, rounded up |
# | a parameter update (`alias_of` is set) | as above | as above | 0 (it is written over its parameter) |
#
# Ends are **inclusive**: a tensor is still alive while its last reader runs. A tensor's
# bytes are `prod(shape) * itemsize`, rounded up to a multiple of `alignment`. The
# minimum counts only *planned* tensors: kind `activation` or `gradient`, and not a
# graph output (inputs, parameters, constants and outputs keep their own storage).
# `schedule` is a list of node names, a topological order; step k is `schedule[k]`.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parents[1]))
    import minigraph as mg

import numpy as np

from minigraph.grading import check_liveness, load_solution
from minigraph.grading.cases import mlp_graph

# %% [markdown]
# ## An example
#
# The training step of a small MLP: forward nodes, the explicit backward nodes of the
# gradient pass, and the two SGD updates. What each node reads and writes:

# %%
g = mlp_graph()
schedule = [n.name for n in g.nodes]
for step, name in enumerate(schedule):
    node = g.node(name)
    print(f"step {step:2}: {', '.join(node.outputs):14} = {node.op}({', '.join(node.inputs)})")
print("graph outputs:", g.outputs)
for name in ["x", "W1", "relu_0", "mean_0", "W1_new"]:
    t = g.tensors[name]
    print(f"{name:8} kind={t.kind:10} shape={t.shape} dtype={t.dtype} alias_of={t.alias_of}")

# %% [markdown]
# What you may use: `graph.tensors` (name -> `TensorInfo` with `shape`, `dtype`, `kind`,
# `producer`, `alias_of`), `graph.consumers[name]` (names of the nodes that read it),
# `graph.outputs`, and `schedule`. Do not call `minigraph.memory.liveness`: writing it is
# the assignment.
#
# ## Your solution
#
# Fill in the function below. Run the cell after it too: it lets a grader swap in another
# file (it does nothing otherwise).

# %% tags=["solution"] nbgrader={"grade": false, "grade_id": "my_liveness", "locked": false, "schema_version": 3, "solution": true}
def my_liveness(graph, schedule, alignment=512):
    """Return (intervals, minimum): intervals[name] = (start, end, bytes) for EVERY tensor
    (end inclusive, bytes rounded up to `alignment`), and the theoretical minimum."""
    # YOUR CODE HERE
    raise NotImplementedError


# %% nbgrader={"grade": false, "grade_id": "load_solution", "locked": true, "schema_version": 3, "solution": false}
# Graders: MINIGRAPH_SOLUTION=path/to/file.py (or "reference") replaces the function above.
my_liveness = load_solution("my_liveness", default=my_liveness)

# %% [markdown]
# Try it on the example (alignment 64, so that small tensors are not all 512 bytes):

# %%
try:
    intervals, minimum = my_liveness(g, schedule, alignment=64)
    for name in ["x", "W1", "matmul_0", "relu_0", "mean_0", "W1_new"]:
        print(f"{name:10} {intervals.get(name)}")
    print("theoretical minimum:", minimum, "bytes")
except NotImplementedError:
    print("my_liveness: not implemented yet")

# %% [markdown]
# ## Check
#
# The check runs your function on the public graphs (the MLP above, a residual network,
# a chain with a constant, and models of the zoo) in their program order and in random
# topological orders, at alignments 1, 64 and 512, then on generated random graphs. Each
# case runs in a separate process with a time limit. A case scores when every interval
# and the minimum are right. When one is wrong, the report names the tensor, the rule it
# breaks, and a small graph (shrunk from the failing one) on which your function still
# goes wrong.
#
# The number under the report is your score out of 100: what nbgrader counts as this cell's
# points when your instructor grades with it.

# %% tags=["check"] nbgrader={"grade": true, "grade_id": "check_liveness", "locked": true, "points": 100, "schema_version": 3, "solution": false}
from minigraph.grading import check_liveness   # again: no name defined above stands in for it

report = check_liveness(my_liveness)
display(report)
report.score          # out of 100: nbgrader takes this number as the points of this cell

# %% [markdown]
# From a terminal, the same check grades a file:
# `python -m minigraph.grading a1 path/to/solution.py` (a `.py` defining `my_liveness`, or
# this notebook itself), or `pytest tests/grading -m a1 --student path/to/solution.py`.
