# %% [markdown]
# # 03 · MXNet's in-place rules and refcount simulation
#
# **Goal.** Let an op write its output over its input when that is provably safe, and
# share the rest of the memory with MXNet's counter simulation: walk the schedule, hand a
# tensor's storage back to a free pool when its last reader has run, and take storage for
# new tensors from that pool. Then check every plan by running it.
#
# **Source.** Tianqi Chen's MXNet memory-optimisation note [Chen 2016]: "In-Place Operations",
# "Standard Memory Sharing", the two-layer perceptron, and "Memory Allocation Algorithm";
# the GE blog's in-place rule [Huawei GE, blog §5]; the CANN article's worked example
# [Huawei GE] for the refcount planner's `match_range`. The code is
# `minigraph/memory/inplace.py` and `minigraph/memory/planners/basic.py`
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
from matplotlib.figure import Figure

from minigraph import examples
from minigraph.examples import named
from minigraph.feeds import random_feeds
from minigraph.lessons import check_answers, l03
from minigraph.memory import inplace_pairs, theoretical_minimum
from minigraph.memory.instances import ge_worked_example
from minigraph.memory.planners import plan_buffers
from minigraph.models import get_model
from minigraph.viz import plot_layout, plot_placement


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
# 2. x's last reader is this op (every other reader ran before) - or, with the strict
#    rule of section 3, x's *only* reader is this op;
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
# ## 3. Last reader or only reader?
#
# The sources do not agree on clause 2. MXNet's note [Chen 2016] allows in-place "on a node
# whose out-degree is 1", and the GE blog [Huawei GE, blog §5.2] asks that the op be the
# input's *unique consumer* (its unsafe example: `y1 = relu(x); y2 = sigmoid(x)`).
# nnvm's PlanMemory [NNVM 2016], and `inplace=True` here, ask less: the op must be the
# input's *last reader in the schedule*. In the counter-example the looser rule lets F
# take B's bytes; the strict rule (`inplace="strict"`) refuses every hand-over of B,
# since B has two readers:

# %%
print("readers of B:", counter.consumers["B"])
live = mg.liveness(counter, alignment=1)
for rule in ("last-reader", "strict"):
    print(f"{rule:11} rule: pairs {inplace_pairs(counter, live, rule=rule)}")

# %% [markdown]
# F being B's last reader is a fact about *one* schedule. Nothing in the graph orders C and
# F (neither reads the other's output), so a runtime that runs independent ops in
# parallel may run them at once, or F first - and F then writes over B while C still has to
# read it. `parallel_hazards` lists the pairs of tensors that share bytes although the graph
# does not order the writer after every reader of the first. With no sharing but the
# hand-overs (`planner="none"`), every hazard is an in-place one:

# %%
NO_SHARING = ONE.replace(planner="none")
plans = {rule: mg.plan_memory(counter, NO_SHARING.replace(inplace=rule)).plan
         for rule in (True, "strict")}
for rule, plan in plans.items():
    print(f"{plan.inplace_rule:11} rule: in place {plan.inplace}, parallel hazards "
          f"{plan.parallel_hazards(counter)}")

# %% [markdown]
# To see the hazard bite, run each plan's offsets in the other order that the graph allows,
# F before C, as a parallel runtime might. The validator refuses the last-reader plan there
# (B is no longer dead when F writes); forced past it, the answer is wrong. The strict
# plan's offsets are right in either order:

# %%
f_before_c = ["B", "F", "C", "G", "loss"]       # also a topological order of `counter`
feeds = random_feeds(counter)
right = mg.Executor(counter).run(feeds)["loss"]
for rule, plan in plans.items():
    moved = mg.MemoryPlan(mg.liveness(counter, f_before_c, alignment=1), plan.offsets,
                          plan.arena_bytes, plan.inplace, "F first",
                          inplace_rule=plan.inplace_rule)
    try:
        moved.validate(counter)
        verdict = "valid"
    except mg.PlanError as e:
        verdict = f"refused: {e}"
    got = mg.Executor(counter, moved, validate=False).run(feeds)["loss"]
    print(f"{plan.inplace_rule:11}: {verdict}\n{'':13}loss {got} (right: {right}), "
          f"same bits: {got.tobytes() == right.tobytes()}")

# %% [markdown]
# The strict rule is the sources' rule and the safe one for a parallel runtime; the
# last-reader rule allows more hand-overs for a sequential one (whether they save bytes
# is another matter: section 6). minigraph offers both: a plan records
# its rule (`plan.inplace_rule`), and the validator checks each hand-over against that
# rule. On the MXNet note's perceptron (section 4) the two differ in one pair: the logits
# fc2 are read by the loss *and* by its gradient, which the last-reader rule lets overwrite
# them - and nothing orders the loss before the gradient, so that pair is a hazard too.

# %% [markdown]
# ## 4. Sharing: MXNet's counter simulation
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
        ("refcount + in-place", ONE.replace(inplace=True)),
        ("refcount + strict", ONE.replace(inplace="strict"))]
feeds = random_feeds(mlp)
reference = mg.Executor(mlp).run(feeds)
for label, opts in rows:
    r = mg.plan_memory(mlp, opts)
    ok = same_bits(reference, mg.Executor(mlp, r.plan).run(feeds))
    print(f"{label:20} arena {r.arena_bytes:7d} B  (minimum {r.theoretical_minimum} B)  "
          f"same result bit for bit: {ok}")
note_name = {t: n for n, t in names.items()}      # the MXNet note's names
handed = {}
for rule in (True, "strict"):
    plan = mg.plan_memory(mlp, ONE.replace(inplace=rule, planner="none")).plan
    handed[plan.inplace_rule] = set(plan.inplace)
    print(f"{plan.inplace_rule:11} in place:",
          [(note_name.get(x, x), note_name.get(y, y)) for x, y in plan.inplace],
          " hazards:", [(note_name.get(x, x), note_name.get(y, y))
                        for x, y in plan.parallel_hazards(mlp)])
assert len(handed["last-reader"] - handed["strict"]) == 1      # section 3: one pair differs
both = mg.plan_memory(mlp, ONE.replace(inplace=True))

# %% [markdown]
# As in the MXNet note's figure [Chen 2016], act1 goes in place over fc1, d(fc1) over d(act1), and
# (with the last-reader rule) the loss gradient d(fc2) over the logits fc2. MXNet's
# SoftmaxOutput does the same safely: there one op makes the output and its gradient, so
# fc2 has one reader. Here the loss and its gradient are two ops, and the strict rule
# keeps fc2. The layout of the last-reader plan: x is time (steps), y the address;
# hatched rectangles are in-place outputs. One weight gradient is far larger than the
# rest (the cell prints it): drawn whole (left), the pair fc2 -> d(fc2) discussed above is
# a sliver, so the right panel shows only the addresses around it.

# %%
print(both.table())
plan = both.plan
largest = max(plan.liveness.planned(), key=lambda iv: iv.bytes)
x, y = names["fc2"], names["d(fc2)"]
assert (x, y) in plan.inplace
at, size = plan.offsets[x], plan.liveness.intervals[x].bytes
lo, hi = max(0, at - 2 * size), at + 3 * size
print(f"largest tensor: {note_name.get(largest.name, largest.name)}, {largest.bytes:,} B of "
      f"a {both.arena_bytes:,} B arena; fc2 -> d(fc2): {size:,} B at offset {at:,}")
fig = Figure(figsize=(14, 4.2), layout="constrained")
left, right = fig.subplots(1, 2)
plot_layout(both, ax=left, legend=False, title="the whole arena")
plot_layout(both, ax=right, zoom=(lo, hi), title="around fc2 -> d(fc2)")
fig

# %% [markdown]
# ## 5. Which free block? `match_range`, and growing a smaller block
#
# When a tensor asks the pool for storage, which free block should it take? nnvm's
# answer [NNVM 2016] (`plan_refcount`'s `match_range`, default 16): the smallest free
# block of at least the
# size, if it is at most `match_range` times the size; else the *largest smaller* block of
# at least size / `match_range`, **grown** to the size (blocks are laid end to end only
# after the simulation, so a block may still grow); else new storage. `match_range=0` turns
# reuse off; 1 takes only blocks of exactly the size, and never grows one.
#
# The CANN article's worked example [Huawei GE] (lesson 05 plans it with GE's own
# planners) shows all three cases. Its five tensors:

# %%
cann = ge_worked_example()
for b in cann:
    print(f"{b.id}: {b.size:5d} B, alive at steps {b.start}..{b.end}")
print("no reuse:", sum(b.size for b in cann), "B   theoretical minimum:",
      theoretical_minimum(cann), "B")

# %% [markdown]
# The planner takes the option through `plan_buffers` (or
# `MemoryOptions(planner="refcount", planner_args={"match_range": ...})` for a graph):

# %%
fig = Figure(figsize=(13, 3.6), layout="constrained")
axes = fig.subplots(1, 3)
for ax, match_range in zip(axes, (0, 1, 2)):
    _, placed = plan_buffers(cann, "refcount", alignment=1, match_range=match_range)
    blocks = {tuple(block): max(b.size for b in cann if b.id in block)
              for block in placed.blocks}
    print(f"match_range {match_range}: arena {placed.arena_bytes} B, blocks {blocks}")
    plot_placement(cann, placed, ax=ax, legend=match_range == 2,
                   title=f"match_range {match_range}: {placed.arena_bytes} B")
arenas = {}
for match_range in (2, 3, 16):
    _, placed = plan_buffers(cann, "refcount", alignment=1, match_range=match_range)
    arenas[match_range] = placed.arena_bytes
    if match_range > 2:
        print(f"match_range {match_range}: arena {placed.arena_bytes} B")
assert len(set(arenas.values())) == 1 and arenas[2] > theoretical_minimum(cann)
fig

# %% [markdown]
# Follow the pool. A dies at step 2, so C (step 3, the same size) takes A's block for any
# match_range of at least 1. At step 4 D finds the pool empty (B and C die at that step,
# and go back only after it). At step 5 E, the largest tensor, finds the blocks of A/C and
# B free but none large enough. With match_range 1 it takes new storage; from 2 on,
# B's block is within range (at least E's size / 2), and E takes it and grows it to its own
# size, which costs only the growth. That is the largest match_range that matters
# here: the printed arenas stop changing after 2.
#
# The counter simulation still stays above the theoretical minimum on this example: D took
# new storage because it came first, and a greedy walk in schedule order cannot take that
# back. GE's two-level reuse (lesson 05) places the large blocks first and reaches it.

# %% [markdown]
# ## 6. In-place is not free for a greedy planner
#
# Fusing an in-place chain makes one long buffer out of several short ones; the counter
# simulation can then find fewer holes. Compare the rows on the zoo's transformer: in-place
# can *lose* bytes, and the strict rule, with fewer hand-overs, can beat the looser one:

# %%
tf = get_model("transformer").graph
arena = {}
for inplace in (False, True, "strict"):
    r = mg.plan_memory(tf, mg.MemoryOptions(inplace=inplace, planner="refcount"))
    arena[inplace] = r.arena_bytes
    print(f"in-place {inplace!s:6}: {len(r.plan.inplace):3d} pairs, arena "
          f"{r.arena_bytes:7d} B, theoretical minimum {r.theoretical_minimum} B")
assert arena[True] > arena[False] and arena["strict"] < arena[True]

# %% [markdown]
# ## Exercises
#
# **1.** The strict rule is sometimes stricter than it needs to be. Build a graph
# (`mg.Graph`) with a pair that the last-reader rule hands over and the strict rule
# refuses, where the hand-over is *no* parallel hazard (the graph itself orders the
# op after every other reader of its input). Put the graph in `ANSWER_1`.
#
# **2.** Make D of the CANN example 2048 bytes instead of 512 (the other four tensors as
# they are: `l03.exercise_2_buffers()` gives them). Simulate the pool by hand: how many
# arena bytes does refcount need with `match_range=1`, and with `match_range=2`? Put the
# two numbers in `ANSWER_2` as `(bytes_with_1, bytes_with_2)`, then check with
# `plan_buffers`.
#
# **3.** Build a graph (`mg.Graph`) in which a `relu` does **not** go in place although
# its input is an activation read by no one else later - a different clause of the rule
# must forbid it. Put the graph in `ANSWER_3`.
#
# **4.** Write the rule yourself: `my_inplace_pairs(graph, live)` returns the (input,
# output) pairs that the last-reader rule hands over, in schedule order - the clauses of
# section 2's "The whole rule". An op's declared pairs are `get_op(node.op).inplace`
# ((output index, input index) pairs); `live.intervals[name]` has each tensor's `start`,
# `end` and `planned`; `live.schedule` the node names in order. Set
# `ANSWER_4 = my_inplace_pairs`; the check compares it with `inplace_pairs` on six graphs.

# %%
from minigraph.ops.registry import get_op   # noqa: E402  (for exercise 4)

ANSWER_1 = None   # an mg.Graph
ANSWER_2 = None   # (bytes, bytes)
ANSWER_3 = None   # an mg.Graph


def my_inplace_pairs(graph, live):
    """[(input, output), ...] that the last-reader rule allows, in schedule order."""
    raise NotImplementedError      # replace this line


ANSWER_4 = None   # then: ANSWER_4 = my_inplace_pairs

# %%
check_answers({1: (ANSWER_1, l03.exercise_1), 2: (ANSWER_2, l03.exercise_2),
               3: (ANSWER_3, l03.exercise_3), 4: (ANSWER_4, l03.exercise_4)})

# %% [markdown]
# ## Summary
#
# - In-place needs the op's cooperation (element i read before element i is written)
#   *and* the schedule's: the input's last reader must be this op. Inputs, parameters and
#   outputs are never overwritten; an operand read twice must not be either.
# - The sources' rule is stricter: the op must be the input's *only* reader (MXNet's
#   out-degree 1, GE's unique consumer). It is safe under any schedule, parallel ones too;
#   the last-reader rule is safe only for the schedule it planned. `inplace="strict"`
#   picks it; the plan records its rule and the validator checks that rule.
# - MXNet's refcount simulation frees a tensor at its last reader and reuses its block
#   for the next tensor that fits: a static plan made by simulating dynamic allocation.
#   `match_range` bounds how far a block's size may be from the request; from 2 on, a
#   smaller free block may be grown.
# - Every plan is validated, and the executor's result is bit for bit the no-reuse one.
#   The validator checks every hand-over against the graph with the plan's in-place rule.
# - Next: lesson 04 - sharing without killing parallelism (colouring).
