# %% [markdown]
# # 05 · GE's block reuse, and choosing the schedule
#
# **Goal.** Reproduce the Ascend Graph Engine's memory reuse on its own worked example:
# Max block and Binary block reuse, then GE's two-level reuse, which reaches the theoretical
# minimum. Then run the same planners on a ResNet, and lower the minimum itself by changing
# the order the nodes run in (GE's "topo optimisation").
#
# **Source.** The CANN article on GE memory reuse [Huawei GE]: section 1 for the block planners,
# section 2 for the schedule. The code is `minigraph/memory/planners/ge.py` and
# `minigraph/memory/topo.py`; read them beside this lesson.

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from matplotlib.figure import Figure

from minigraph.lessons import check_answers
from minigraph.memory import theoretical_minimum
from minigraph.memory.instances import ge_worked_example
from minigraph.memory.planners import plan_buffers
from minigraph.memory.planners.ge import binary_ranges, reuse_blocks
from minigraph.experiments.techniques import compare_techniques
from minigraph.viz import plot_comparison, plot_placement

# %% [markdown]
# ## 1. The five tensors of [Huawei GE]
#
# A planner only sees buffers: a size and a life `[start, end]` in steps (both ends
# inclusive). The CANN GE article's example has five [Huawei GE]: A and C of 1024 bytes, B of 2048,
# D of 512 and E of 4096. Without reuse each gets its own bytes; the theoretical minimum is the most
# bytes alive at one step.

# %%
buffers = ge_worked_example()
for b in buffers:
    print(f"{b.id}: {b.size:5d} B, alive at steps {b.start}..{b.end}")
no_reuse = sum(b.size for b in buffers)
print("no reuse:", no_reuse, "B   theoretical minimum:", theoretical_minimum(buffers), "B")

# %% [markdown]
# ## 2. Max block and Binary block [Huawei GE, §1.1]
#
# Both walk the tensors in schedule order and put each one in a free *block* (a block whose
# last tensor died before this one starts), or open a new block. They differ in the block
# *ranges*: Max block has one range, the largest size, so any tensor may reuse any block;
# Binary block has ranges that roughly double, and a tensor only reuses a block of its own
# range. Afterwards every block shrinks to its largest tensor ("resize") and the blocks are
# laid end to end.

# %%
sizes = [b.size for b in buffers]
print("Max block range:   ", [max(sizes)])
print("Binary block ranges:", binary_ranges(sizes))

results = {}
for name in ("none", "ge-max", "ge-binary", "ge"):
    aligned, placement = plan_buffers(buffers, name, alignment=1)
    results[name] = (aligned, placement)
    blocks = placement.blocks or []
    print(f"{name:10} arena {placement.arena_bytes:5d} B"
          + (f"  blocks {blocks}" if blocks else "") + f"  {placement.note}")

# %% [markdown]
# Max block puts A, C and E in one block (their lives do not overlap) but B and D each need
# their own. The pictures are Chainer-Opt's strip packing [Sekiyama 2018]: x is time, y is the
# address, each buffer a rectangle; a colour is one shared block.

# %%
fig = Figure(figsize=(13, 3.8), layout="constrained")
axes = fig.subplots(1, 3)
for ax, name in zip(axes, ("none", "ge-max", "ge")):
    aligned, placement = results[name]
    plot_placement(aligned, placement, ax=ax, legend=name == "ge",
                   title=f"{name}: {placement.arena_bytes} B")
fig

# %% [markdown]
# ## 3. GE's two-level reuse [Huawei GE, §1.2]
#
# **Level 1** reuses a block only for a tensor of exactly the same size: A and C share one.
# **Level 2** sorts the blocks by size, largest first, and puts each at the lowest offset
# that is free for its whole life, so smaller blocks sit inside larger ones whose lives they
# miss: B below E's address range (B dies before E is born), A/C on top of B, D on top of E.
# On this example the result is the theoretical minimum: nothing is wasted.

# %%
level1 = reuse_blocks(buffers, lambda b: b.size)
for k, block in enumerate(level1):
    print(f"level-1 block {k}: {[b.id for b in block]} size {block[0].size} B, "
          f"alive {min(b.start for b in block)}..{max(b.end for b in block)}")
aligned, placement = results["ge"]
print("GE offsets:", placement.offsets)
print("GE arena:", placement.arena_bytes, "B = theoretical minimum:",
      placement.arena_bytes == theoretical_minimum(buffers))

# %% [markdown]
# GE rounds every block up to 512 bytes ("resize"). With the default alignment of 512 the
# example keeps its numbers, since every size is already a multiple of 512:

# %%
for name in ("ge-max", "ge-binary", "ge"):
    aligned, placement = plan_buffers(buffers, name, alignment=512)
    print(f"{name:10} arena with 512-byte alignment: {placement.arena_bytes} B")

# %% [markdown]
# ## 4. The same planners on a ResNet
#
# A training step of a small ResNet (`minigraph.models`): a few hundred planned tensors.
# Each bar is `mg.plan_memory` with one planner; all with in-place on.

# %%
from minigraph.models import get_model

resnet = get_model("resnet", batch=2).graph
print(resnet.summary().splitlines()[0])
rows = compare_techniques(resnet, mg.MemoryOptions(inplace=True),
                          planners=["refcount", "ge-max", "ge-binary", "ge-hybrid", "ge"])
for row in rows:
    print(row)
plot_comparison(rows, title="ResNet training step: GE's planners")

# %% [markdown]
# ## 5. Topo optimisation: lower the minimum itself [Huawei GE, §2]
#
# A planner can at best reach the theoretical minimum *of its schedule*. Another schedule
# has another minimum. `minigraph.memory.ORDERS` holds the orders: BFS, DFS, reverse DFS,
# GE's adjustment (a node whose inputs live on anyway moves to just before its first
# consumer), a memory-greedy list scheduler, and "best" (try them all, keep the lowest).

# %%
orders = [o for o in mg.memory.ORDERS]
print("orders:", orders)
table = {}
for order in orders:
    rep = mg.plan_memory(resnet, mg.MemoryOptions(inplace=True, planner="ge", order=order))
    table[order] = rep
    print(f"{order:8} theoretical minimum {rep.theoretical_minimum:8d} B   "
          f"GE arena {rep.arena_bytes:8d} B")

# %%
fig = Figure(figsize=(9, 3.2), layout="constrained")
ax = fig.add_subplot()
xs = range(len(table))
ax.bar([x - 0.2 for x in xs], [r.theoretical_minimum / 1024 for r in table.values()],
       width=0.4, label="theoretical minimum")
ax.bar([x + 0.2 for x in xs], [r.arena_bytes / 1024 for r in table.values()], width=0.4,
       label="GE two-level arena")
ax.set_xticks(list(xs), list(table))
ax.set_ylabel("KiB")
ax.set_title("ResNet: the schedule sets the minimum, the planner approaches it")
ax.legend()
fig

# %% [markdown]
# Every order gives the same results when run (the executor checks nothing but the plan);
# only the lifetimes, and so the bytes, change. Which order wins depends on the graph's
# shape: try the exercises.
#
# ## Exercises
#
# **1.** Without running a planner: how many bytes does Binary block reuse need on the
# worked example? (Hint: which ranges do A, B, C, D, E fall into, which blocks can be reused,
# and what is each block resized to?) Put your number in `ANSWER_1`.
#
# **2.** For the transformer of the zoo (`get_model("transformer").graph`), which order
# of `mg.memory.ORDERS` (other than "best") gives the lowest theoretical minimum with
# in-place on? Put its name in `ANSWER_2`.
#
# **3.** Make a buffer list of your own (a few `mg.Buffer(id, start, end, size)`) on which
# GE's two-level reuse does *not* reach the theoretical minimum, and put it in `ANSWER_3`.

# %%
ANSWER_1 = None   # a number of bytes
ANSWER_2 = None   # an order's name
ANSWER_3 = None   # a list of mg.Buffer

# %%
def check_1(answer):
    aligned, placement = plan_buffers(buffers, "ge-binary", alignment=1)
    right = placement.arena_bytes
    return answer == right, f"Binary block needs {right} B: {placement.note}"


def check_2(answer):
    g = get_model("transformer").graph
    mins = {o: mg.plan_memory(g, inplace=True, planner="none", order=o).theoretical_minimum
            for o in mg.memory.ORDERS if o != "best"}
    best = min(mins.values())
    winners = [o for o, m in mins.items() if m == best]
    return answer in winners, f"lowest minimum {best} B with {', '.join(winners)}"


def check_3(my_buffers):
    aligned, placement = plan_buffers(my_buffers, "ge", alignment=1)
    arena, low = placement.arena_bytes, theoretical_minimum(my_buffers)
    return arena > low, f"GE {arena} B, theoretical minimum {low} B"


check_answers({1: (ANSWER_1, check_1), 2: (ANSWER_2, check_2), 3: (ANSWER_3, check_3)})

# %% [markdown]
# ## Summary
#
# - A block planner walks tensors in schedule order and reuses free blocks; the block
#   *ranges* decide who may share (Max: everyone, Binary: only similar sizes).
# - GE's two-level reuse first merges equal sizes, then nests small blocks inside larger
#   ones whose lives they miss: on the CANN GE article's example it reaches the theoretical minimum
#   [Huawei GE].
# - The minimum belongs to a schedule: a better order (topo optimisation) lowers it, and
#   every planner gains at once.
# - Next: lesson 06 drops blocks altogether and places every tensor at any offset.
