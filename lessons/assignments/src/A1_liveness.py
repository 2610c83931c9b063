# %% [markdown]
# # Assignment 1 · Liveness with recomputation, and the theoretical minimum
#
# **Task.** Write `my_liveness(graph, schedule, alignment)` for a schedule that may run a
# node **more than once**. It returns a pair `(intervals, minimum)`:
#
# * `intervals`: a dict from **every** tensor name of the graph to the list of its
#   *copies*, `[(start, end, bytes), ...]`, in the order they are made;
# * `minimum`: the theoretical minimum of the schedule, in bytes.
#
# Lesson 02 gave every tensor one life under a schedule that runs each node once; its
# module, `minigraph/memory/liveness.py`, is that case, and it refuses a schedule that
# lists a node twice. Here a node may run again: a *recomputation*. Checkpointing [Chen
# 2016] drops a forward tensor after the forward pass and runs its node again when the
# backward pass needs it, to trade compute for memory; DTR (lesson 07) decides the same at
# run time. Everything a memory planner does starts from these lives, and the minimum is
# the number every plan of the schedule is measured against.
#
# **Background (the sources).**
# * The GE blog [Huawei GE, blog §3] defines a tensor's *active interval*
#   `[s_i, e_i]`: `s_i` is the step that produces it, `e_i` the last step that consumes it.
#   Graph inputs start at step 0 and graph outputs end at the last step.
# * The CANN article [Huawei GE] defines the *theoretical minimum*: walk the steps, add a
#   tensor's bytes where its life begins, subtract them where it ends; the largest total
#   is the minimum (4608 B against 8704 B without reuse in its example). Sizes are
#   rounded up to 512 bytes in GE.
# * Chen et al. [Chen 2016] recompute dropped forward tensors from kept checkpoints, and
#   MXNet's explicit backward pass is why a training graph has so many tensors to keep.
#
# **The rules** (minigraph's, which the grader uses). Step k runs the node `schedule[k]`.
# Every node runs at least once, and after a run of the producer of each of its inputs.
#
# * Each **run** of a node makes a **new copy** of each of its outputs, born at that step.
# * A run reads the **latest** copy of each input: the one made last before it.
# * A copy lives from the step that makes it to the last step that **reads that copy**,
#   both **inclusive**; a copy nobody reads dies at the step that makes it. The last copy
#   of a graph output lives to the last step.
# * A tensor no node makes (input, parameter, constant) has one copy, `(0, last step)`.
# * Every copy has the tensor's bytes: `prod(shape) * itemsize`, rounded up to a multiple
#   of `alignment`; a parameter update (`alias_of` is set) has 0 (it is written over its
#   parameter).
# * The minimum is the largest total, over the steps, of the bytes of the *planned*
#   copies alive at that step. Planned tensors are those of kind `activation` or
#   `gradient` that are not graph outputs (inputs, parameters, constants and outputs keep
#   their own storage).
#
# A schedule without repeats gives every tensor one copy and lesson 02's intervals.

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
from minigraph.grading.cases import small_mlp_graph

# %% [markdown]
# ## An example
#
# The training step of a small MLP: forward nodes, the explicit backward nodes of the
# gradient pass, and the two SGD updates. What each node reads and writes:

# %%
g = small_mlp_graph()
program = [n.name for n in g.nodes]
for step, name in enumerate(program):
    node = g.node(name)
    print(f"step {step:2}: {', '.join(node.outputs):14} = {node.op}({', '.join(node.inputs)})")
print("graph outputs:", g.outputs)
for name in ["x", "W1", "relu_0", "mean_0", "W1_new"]:
    t = g.tensors[name]
    print(f"{name:8} kind={t.kind:10} shape={t.shape} dtype={t.dtype} alias_of={t.alias_of}")

# %% [markdown]
# Checkpointing it by hand: `relu_0` is read by `matmul_1` in the forward pass, then by
# `matmul_3` and `relu_grad_0` in the backward pass. Run `matmul_0` and `relu_0` again just
# before `matmul_3`, and the first copy of `relu_0` can die at step 2 - but the second run
# of `matmul_0` reads `x` and `W1` again, and the backward readers now read the *second*
# copy of `relu_0`. Work out the copies of `matmul_0` and `relu_0` on paper before you run
# your function on it.

# %%
k = program.index("matmul_3")
schedule = program[:k] + ["matmul_0", "relu_0"] + program[k:]
for step, name in enumerate(schedule):
    again = "  (runs again)" if name in schedule[:step] else ""
    print(f"step {step:2}: {name}{again}")

# %% [markdown]
# What you may use: `graph.tensors` (name -> `TensorInfo` with `shape`, `dtype`, `kind`,
# `producer`, `alias_of`), `graph.node(name)` (its `inputs` and `outputs`),
# `graph.consumers[name]` (names of the nodes that read it), `graph.outputs`, and
# `schedule`. `minigraph.memory.liveness` answers only the schedules without repeats, and
# the grader checks every tensor's copies: writing the general case is the assignment.
#
# ## Your solution
#
# Fill in the function below. Run the cell after it too: it lets a grader swap in another
# file (it does nothing otherwise).

# %% tags=["solution"] nbgrader={"grade": false, "grade_id": "my_liveness", "locked": false, "schema_version": 3, "solution": true}
def my_liveness(graph, schedule, alignment=512):
    """Return (intervals, minimum): intervals[name] = [(start, end, bytes), ...], one per
    copy of EVERY tensor in the order they are made (end inclusive, bytes rounded up to
    `alignment`), and the theoretical minimum of the planned copies."""
    # YOUR CODE HERE
    raise NotImplementedError


# %% nbgrader={"grade": false, "grade_id": "load_solution", "locked": true, "schema_version": 3, "solution": false}
# Graders: MINIGRAPH_SOLUTION=path/to/file.py (or "reference") replaces the function above.
my_liveness = load_solution("my_liveness", default=my_liveness)

# %% [markdown]
# Try it on the example (alignment 64, so that small tensors are not all 512 bytes), with
# and without the recomputation:

# %%
try:
    for label, sched in [("program order", program), ("with recomputation", schedule)]:
        intervals, minimum = my_liveness(g, sched, alignment=64)
        print(f"{label}: theoretical minimum {minimum} bytes")
        for name in ["x", "matmul_0", "relu_0", "mean_0", "W1_new"]:
            print(f"    {name:10} {intervals.get(name)}")
except NotImplementedError:
    print("my_liveness: not implemented yet")
except Exception as e:          # yours to fix; the check below says more
    print(f"my_liveness raised {type(e).__name__}: {e}")

# %% [markdown]
# ## Check
#
# The check runs your function on the public graphs (the MLP above, a residual network,
# a chain with a constant, and models of the zoo) in program order without recomputation
# (lesson 02's rules), then in program and random orders with recomputations, at
# alignments 1, 64 and 512, then on generated random graphs with recomputations. Each case
# runs in a separate process with a time limit. A case scores when every copy's interval
# and the minimum are right. When one is wrong, the report names the tensor, the copy,
# the rule it breaks, and code that reproduces it.
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
