# %% [markdown]
# # Assignment 1 · Liveness with recomputation, in-place hand-overs, the minimum
#
# **Task.** Write `my_liveness(graph, schedule, alignment, inplace=False)` for a schedule
# that may run a node **more than once** (a *recomputation*).
#
# * **Part A** (`inplace=False`): return `(intervals, minimum)`: every tensor's *copies*
#   with their lives, and the theoretical minimum of the schedule, in bytes.
# * **Part B** (`inplace=True`): return `(intervals, minimum, handovers)`: also which copies
#   an op writes over one of its input copies, and the minimum when each such chain of
#   copies shares one buffer.
#
# Lesson 02 gave every tensor one life under a schedule that runs each node once, and its
# exercise 4 had you write that. Lesson 03 let an op write its output over its input. The
# library's modules (`memory/liveness.py`, `memory/inplace.py`) answer exactly those
# cases, and refuse a schedule that lists a node twice. Checkpointing [Chen 2016] drops a
# forward tensor after the forward pass and runs its node again when the backward pass
# needs it; DTR (lesson 07) decides the same at run time. This assignment is the general
# case, and **how to compute it is yours to design**: below is what the answer *means*,
# with examples, not a recipe. Expect to work an example on paper before you code.
#
# **Background (the sources).** The GE blog [Huawei GE, blog §3] defines a tensor's
# *active interval* `[s_i, e_i]`, from the step that produces it to the last step that
# consumes it; the CANN article [Huawei GE] defines the *theoretical minimum*, the largest
# number of bytes alive at one step; the MXNet note [Chen 2016] and nnvm's PlanMemory
# [NNVM 2016] give the in-place rule of lesson 03.

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
from minigraph.ops.registry import get_op

# %% [markdown]
# ## What the answer means
#
# **Steps and runs.** Step k runs the node `schedule[k]`. Every node runs at least once,
# and each run comes after a run of the producer of each of its inputs.
#
# **Copies.** A value exists in memory from the moment a run writes it. When a node runs
# again it computes its outputs afresh and writes them to new memory: each run of a node
# makes a new *copy* of each of its outputs, and the copies of a tensor are numbered 0, 1,
# ... in the order they are made. A tensor no node makes (an input, a parameter, a
# constant) is one copy, there from the start.
#
# **Which copy a run reads.** A run reads, of each of its inputs, the value that is
# current when it runs: the copy made most recently before it.
#
# **A copy's life** is the steps during which its bytes must be kept: from the step that
# makes it to the last step that reads *that copy*, both counted (the copy is still being
# read while its last reader runs). A copy nobody reads lives at its own step only. A
# graph output must survive the run: its last copy lives to the last step. A leaf lives
# for the whole run. `intervals[name]` is the list of the copies of `name`,
# `[(start, end, bytes), ...]`, in the order they are made, for **every** tensor.
#
# **Bytes.** A copy holds the tensor's elements: `prod(shape) * itemsize` bytes, rounded up
# to a multiple of `alignment`. A parameter update (`alias_of` is set) is written over its
# parameter: 0 bytes of its own.
#
# **The minimum** is the largest total, over the steps, of the bytes alive at that step,
# counting only the memory a planner places: the copies of *planned* tensors, those of
# kind `activation` or `gradient` that are not graph outputs. Inputs, parameters, constants
# and outputs keep their own storage.
#
# With a schedule that runs every node once, each tensor has one copy and these are lesson
# 02's intervals: `mg.liveness` prints them. Here on a small MLP training step
# (forward, explicit backward, SGD updates), at alignment 64:

# %%
g = small_mlp_graph()
program = [n.name for n in g.nodes]
for step, name in enumerate(program):
    node = g.node(name)
    print(f"step {step:2}: {', '.join(node.outputs):14} = {node.op}({', '.join(node.inputs)})")
print("graph outputs:", g.outputs)

# %% tags=["skip-grading"]
live = mg.liveness(g, program, alignment=64)    # lesson 02's module (not when grading)
for name in ["x", "matmul_0", "relu_0", "mean_0", "W1_new"]:
    iv, t = live.intervals[name], g.tensors[name]
    print(f"{name:9} {t.kind:10} {t.dtype}{list(t.shape)}: one copy "
          f"[({iv.start}, {iv.end}, {iv.bytes})]")
print("theoretical minimum:", live.theoretical_minimum(), "bytes")

# %% [markdown]
# **A recomputation.** `relu_0` is read by `matmul_1` in the forward pass, then by
# `matmul_3` and `relu_grad_0` in the backward pass. Run `matmul_0` and `relu_0` again
# just before `matmul_3`: the first copy of `relu_0` now has its last reader in the
# forward pass, the backward readers read the *second* copy, and the second run of
# `matmul_0` reads `x` and `W1` once more. The library refuses this schedule; your
# function answers it. Work out the copies of `matmul_0` and `relu_0` on paper first.

# %%
k = program.index("matmul_3")
schedule = program[:k] + ["matmul_0", "relu_0"] + program[k:]
for step, name in enumerate(schedule):
    again = "  (runs again)" if name in schedule[:step] else ""
    print(f"step {step:2}: {name}{again}")

# %% tags=["skip-grading"]
try:
    mg.liveness(g, schedule)
except mg.MinigraphError as e:
    print(f"mg.liveness: {type(e).__name__}: {e}")

# %% [markdown]
# ## Part B: in-place hand-overs
#
# An elementwise op can write its output over one of its inputs, so that the two copies
# are one buffer (lesson 03). A **hand-over** `((x, i), (y, j))` says: the run that makes
# copy `j` of `y` writes it into the bytes of copy `i` of `x`, which it reads. It is
# allowed - and the answer lists it - exactly when nothing can observe it:
#
# * the op declares the pair in-place capable: `get_op(node.op).inplace` lists
#   `(output index, input index)` pairs whose kernel reads element n before it writes
#   element n;
# * both tensors are planned (not a graph input, parameter, constant or graph output), with
#   the same dtype and the same number of elements;
# * the run reads `x` through one operand only (`add_n(g, g, g)` would read its third
#   operand after overwriting it);
# * no step after this run reads copy `i` of `x` - with recomputations this is a
#   property of the *copy*: an earlier copy may die while a later one lives on;
# * a copy gives its bytes to at most one output copy and takes at most one input copy's;
#   where a run could hand over more than one pair, it takes them in the order its op
#   declares them.
#
# `handovers` is the list of those pairs (copy numbers from 0), in any order. Handed-over
# copies form chains, and a chain is **one buffer**: its bytes count once, from its first
# copy's birth to its last copy's death. The minimum of part B counts the buffers so, and
# the other planned copies as in part A. `intervals` stays what it was in part A (the
# lives of the copies themselves).
#
# In program order this is lesson 03's last-reader rule; the library's `inplace_pairs`
# prints its hand-overs (every copy is copy 0). With the recomputation above, the
# library has no answer:

# %% tags=["skip-grading"]
from minigraph.memory import inplace_pairs   # lesson 03's module (not when grading)

print("declared by relu:", get_op("relu").inplace, " by matmul:", get_op("matmul").inplace)
print("program order:", inplace_pairs(g, live))

# %% [markdown]
# What you may use: `graph.tensors` (name -> `TensorInfo` with `shape`, `dtype`, `kind`,
# `producer`, `alias_of`), `graph.node(name)` (its `op`, `inputs` and `outputs`),
# `graph.consumers[name]` (names of the nodes that read it), `graph.outputs`, `get_op`,
# and `schedule`. Leave the library's liveness, in-place and planner modules out of your
# function: the grader's sandbox refuses some of them, and none answers a schedule that
# runs a node twice. The grader checks every copy, every hand-over and the minimum.
#
# ## Your solution
#
# Fill in the function below. Run the cell after it too: it lets a grader swap in another
# file (it does nothing otherwise).

# %% tags=["solution"] nbgrader={"grade": false, "grade_id": "my_liveness", "locked": false, "schema_version": 3, "solution": true}
def my_liveness(graph, schedule, alignment=512, inplace=False):
    """Part A: return (intervals, minimum): intervals[name] = [(start, end, bytes), ...],
    one per copy of EVERY tensor in the order they are made (end inclusive, bytes rounded
    up to `alignment`), and the theoretical minimum of the planned copies. Part B
    (`inplace=True`): return (intervals, minimum, handovers), handovers = [((input, i),
    (output, j)), ...], and the minimum counting each chain of hand-overs as one buffer."""
    # YOUR CODE HERE
    raise NotImplementedError


# %% nbgrader={"grade": false, "grade_id": "load_solution", "locked": true, "schema_version": 3, "solution": false}
# Graders: MINIGRAPH_SOLUTION=path/to/file.py (or "reference") replaces the function above.
my_liveness = load_solution("my_liveness", default=my_liveness)

# %% [markdown]
# Try it on the example (alignment 64), in program order and with the recomputation,
# without and with hand-overs:

# %%
try:
    for label, sched in [("program order", program), ("with recomputation", schedule)]:
        intervals, minimum = my_liveness(g, sched, alignment=64)
        _, minimum_b, handovers = my_liveness(g, sched, alignment=64, inplace=True)
        print(f"{label}: theoretical minimum {minimum} bytes, {minimum_b} with the "
              f"hand-overs {handovers}")
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
# a chain with a constant, and models of the zoo) in program order, then in program and
# random orders with recomputations, at alignments 512, 1 and 64, then on generated random
# graphs with recomputations: part A, then the same public cases and other generated
# graphs with `inplace=True` (part B). Each case runs in a separate process with a time
# limit, and scores when everything it returns is right: the copies, the hand-overs (part
# B) and the minimum. When one is wrong, the report names the tensor or the hand-over,
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
