# %% [markdown]
# # 03 · MXNet's in-place rules and refcount simulation
#
# **Goal.** Let an op write its output over its input when that is provably safe, and
# share the rest of the memory with MXNet's counter simulation: walk the schedule, hand a
# tensor's storage back to a free pool when its last reader has run, and take storage for
# new tensors from that pool. Then check every plan by running it.
#
# **Source.** Tianqi Chen's MXNet memory-optimisation note [Chen 2016]: "In-Place Operations",
# "Standard Memory Sharing", the two-layer perceptron, and "Memory Allocation Algorithm".
# The code is `minigraph/memory/inplace.py` and `minigraph/memory/planners/basic.py`
# (`plan_refcount`); read them beside this lesson.

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

import numpy as np

from minigraph import examples
from minigraph.examples import named
from minigraph.feeds import random_feeds
from minigraph.lessons import check_answers
from minigraph.memory import inplace_pairs
from minigraph.models import get_model
from minigraph.viz import plot_layout


def same_bits(a, b):
    return all(a[k].tobytes() == b[k].tobytes() for k in a)


ONE = mg.MemoryOptions(planner="refcount", alignment=1)   # exact bytes, no rounding

# %% [markdown]
# ## 1. Three chained sigmoids, one buffer
#
# The MXNet note's first example [Chen 2016]: "sigmoid can be computed in place: input and output
# share memory, so a chain of any length needs one buffer". Our chain is A -> B -> C -> D ->
# sum. A is a graph input (never overwritten), so B needs bytes of its own; C can take
# B's bytes and D can take C's.

# %%
chain = examples.sigmoid_chain(3, shape=(4, 8))
mg.draw(chain)

# %%
for inplace in (False, True):
    r = mg.plan_memory(chain, ONE.replace(inplace=inplace))
    print(f"in-place {inplace!s:5}: arena {r.arena_bytes} B of {r.no_reuse_bytes} B; "
          f"in place: {r.plan.inplace}")
print(mg.plan_memory(chain, ONE.replace(inplace=True)).table())

# %% [markdown]
# Without in-place, sharing alone gets to two buffers: B and D may share (B is dead
# before D is made) but C overlaps both. With in-place the chain needs one, whatever its
# length:

# %%
for n in (1, 3, 10, 30):
    r = mg.plan_memory(examples.sigmoid_chain(n), ONE.replace(inplace=True))
    print(f"{n:2d} sigmoids: arena {r.arena_bytes} B")

# %% [markdown]
# ## 2. The counter-example: B also read by F
#
# "In-place optimisation is not always possible: B is used by C and also by F. After
# C = sigmoid(B), B is still needed." So the rule must look at *all* readers of B, in the
# schedule. Here C runs before F.

# %%
counter = examples.inplace_counterexample()
print(counter)
print("in-place pairs:", inplace_pairs(counter, mg.liveness(counter, alignment=1)))

# %% [markdown]
# C may not take B's bytes - but F, B's *last* reader, may (it is `mul_scalar`, also
# elementwise). If F ran before C, C would be the last reader and could:

# %%
f_first = examples.inplace_counterexample(f_first=True)
print("F first:", inplace_pairs(f_first, mg.liveness(f_first, alignment=1)))

# %% [markdown]
# ### The whole rule
#
# `inplace.py` allows output y to take input x's bytes only if
# 1. the op declares the pair in-place capable (its kernel reads element i before it
#    writes element i: elementwise ops, reshape; not matmul, transpose, pooling);
# 2. x's last reader is this op (every other reader ran before);
# 3. x and y have the same dtype and number of bytes;
# 4. x and y are planned: not a graph input, parameter, constant or graph output;
# 5. the op reads x through one operand only;
# 6. each x gives its bytes to one y, each y takes one x.
#
# Rule 5 was found by this lesson's tests. `add_n(g, g, g)` (autodiff makes it from
# `h + h + h`) adds its first two operands into the output and then reads the third:
# had the output taken g's bytes, it would read 2g there. The validator checks every
# hand-over against the graph with the same rule, so it refuses this pair; forced past
# it (`validate=False`), here is what happens:

# %%
with mg.name_scope():
    a = named(mg.tanh(mg.input("x", (2, 3))), "a")
    s = named(mg.add_n(a, a, a), "s")
    triple = mg.Graph([named(mg.sum(s), "loss")])
print("pairs the rule allows:", inplace_pairs(triple, mg.liveness(triple, alignment=1)))
good = mg.plan_memory(triple, ONE.replace(inplace=True)).plan
forced = mg.MemoryPlan(good.liveness, {**good.offsets, "s": good.offsets["a"]},
                       good.arena_bytes, [("a", "s")], "forced")
try:
    forced.validate(triple)
except mg.PlanError as e:
    print("refused:", e)
feeds = {"x": np.ones((2, 3), np.float32)}
print("right:", mg.Executor(triple).run(feeds)["loss"],
      "  forced in place:", mg.Executor(triple, forced, validate=False).run(feeds)["loss"])

# %% [markdown]
# ## 3. Sharing: MXNet's counter simulation
#
# The MXNet note's algorithm simulates the run [Chen 2016]: each tensor's counter is the number of
# its readers still to run. When it reaches 0 (at its last reader) the tensor's storage goes
# back to a free pool; a new tensor takes the pool's best-fitting block (or new storage).
# The tensors freed at a step go back to the pool *after* that step's outputs are placed:
# an op's inputs are still being read while it writes. Nothing is allocated during the
# simulation; afterwards one arena holds all the blocks.
#
# The MXNet note's two-layer perceptron [Chen 2016], forward + backward + update:

# %%
mlp, names = examples.two_layer_mlp()
mg.draw(mlp)

# %%
rows = [("no reuse", ONE.replace(planner="none")), ("refcount", ONE),
        ("refcount + in-place", ONE.replace(inplace=True))]
feeds = random_feeds(mlp)
reference = mg.Executor(mlp).run(feeds)
for label, opts in rows:
    r = mg.plan_memory(mlp, opts)
    ok = same_bits(reference, mg.Executor(mlp, r.plan).run(feeds))
    print(f"{label:20} arena {r.arena_bytes:7d} B  (minimum {r.theoretical_minimum} B)  "
          f"same result bit for bit: {ok}")
both = mg.plan_memory(mlp, ONE.replace(inplace=True))
seed_name = {t: n for n, t in names.items()}
print("in place:", [(seed_name.get(x, x), seed_name.get(y, y)) for x, y in both.plan.inplace])

# %% [markdown]
# As in the MXNet note's figure [Chen 2016], act1 goes in place over fc1, d(fc1) over d(act1), and
# the loss gradient d(fc2) over the logits fc2 (MXNet's SoftmaxOutput does the same). The
# layout: x is time (steps), y the address; hatched rectangles are in-place outputs.

# %%
print(both.table())
plot_layout(both)

# %% [markdown]
# ## 4. In-place is not free for a greedy planner
#
# Fusing an in-place chain makes one long buffer out of several short ones; the counter
# simulation can then find fewer holes. On the zoo's transformer in-place *loses* bytes:

# %%
tf = get_model("transformer").graph
for inplace in (False, True):
    r = mg.plan_memory(tf, mg.MemoryOptions(inplace=inplace, planner="refcount"))
    print(f"in-place {inplace!s:5}: arena {r.arena_bytes:7d} B, theoretical minimum "
          f"{r.theoretical_minimum} B")

# %% [markdown]
# ## Exercises
#
# **1.** In the counter-example in program order (`counter`), which tensor takes B's
# bytes in place? Put its name in `ANSWER_1`.
#
# **2.** A sigmoid chain of length 10 (`examples.sigmoid_chain(10)`, 128 bytes a tensor)
# with refcount and *no* in-place, alignment 1: how many arena bytes? Put the number in
# `ANSWER_2`.
#
# **3.** Build a graph (`mg.Graph`) in which a `relu` does **not** go in place although
# its input is an activation read by no one else later - a different clause of the rule
# must forbid it. Put the graph in `ANSWER_3`.

# %%
ANSWER_1 = None   # a tensor name
ANSWER_2 = None   # bytes
ANSWER_3 = None   # an mg.Graph

# %%
def check_1(answer):
    pairs = inplace_pairs(counter, mg.liveness(counter, alignment=1))
    right = [y for x, y in pairs if x == "B"]
    return answer in right, f"B goes to {right}"


def check_2(answer):
    right = mg.plan_memory(examples.sigmoid_chain(10), ONE).arena_bytes
    return answer == right, (f"{right} B: each tensor overlaps its neighbours, so two "
                             "buffers alternate")


def check_3(g):
    live = mg.liveness(g)
    pairs = set(inplace_pairs(g, live))
    found = []
    for n in g.nodes:
        if n.op != "relu":
            continue
        x, y = n.inputs[0], n.outputs[0]
        iv = live.intervals[x]
        if iv.kind in ("activation", "gradient") and iv.end == live.schedule.index(
                n.name) and (x, y) not in pairs:
            found.append(f"{x} -> {y} (is {y} planned? {live.intervals[y].planned})")
    return bool(found), f"{found or 'every such relu went in place'}"


check_answers({1: (ANSWER_1, check_1), 2: (ANSWER_2, check_2), 3: (ANSWER_3, check_3)})

# %% [markdown]
# ## Summary
#
# - In-place needs the op's cooperation (element i read before element i is written)
#   *and* the schedule's: the input's last reader must be this op. Inputs, parameters and
#   outputs are never overwritten; an operand read twice must not be either.
# - MXNet's refcount simulation frees a tensor at its last reader and reuses its block
#   for the next tensor that fits: a static plan made by simulating dynamic allocation.
# - Every plan is validated, and the executor's result is bit for bit the no-reuse one.
#   The validator cannot check the in-place rule itself; `inplace.py` must.
# - Next: lesson 04 - sharing without killing parallelism (colouring).
