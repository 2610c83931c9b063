# %% [markdown]
# # 05 · GE's block reuse
#
# **Goal.** Reproduce the Ascend Graph Engine's memory reuse on its own worked example:
# Max block and Binary block reuse, then GE's two-level reuse, which reaches the theoretical
# minimum. Then run the same planners on a ResNet. (Lowering the minimum itself by
# changing the order the nodes run in, GE's "topo optimisation", is lesson 05b.)
#
# **Source.** The CANN article on GE memory reuse [Huawei GE], section 1. The code is
# `minigraph/memory/planners/ge.py`; read it beside this lesson. GE's level 2 asks
# greedy-size's question, "the lowest offset free for the whole life", of the plain list
# of placed boxes in `planners/greedy.py`; the planner "ge" asks it of a faster index
# (`planners/engine/boxes.py`), which finds the same offset sooner ("ge:textbook" gives the
# same plan).

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from matplotlib.figure import Figure

from minigraph.lessons import check_answers, l05
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
assert (no_reuse, theoretical_minimum(buffers)) == (8704, 4608)    # the article's figure 2

# %% [markdown]
# ## 2. Max block and Binary block [Huawei GE, §1.1]
#
# Both walk the tensors in schedule order and put each one in a free *block* (a block whose
# last tensor died before this one starts), or open a new block. They differ in the block
# *ranges*: Max block has one range, the largest size, so any tensor may reuse any block;
# Binary block has ranges that roughly double, and a tensor only reuses a block of its own
# range. Afterwards every block shrinks to its largest tensor ("resize") and the blocks are
# laid end to end. The article walks through Max block only (its figures 3 and 4); Binary
# block's bytes are exercise 1.

# %%
sizes = [b.size for b in buffers]
print("Max block range:   ", [max(sizes)])
print("Binary block ranges:", binary_ranges(sizes))

results = {}
for name in ("none", "ge-max", "ge"):
    aligned, placement = plan_buffers(buffers, name, alignment=1)
    results[name] = (aligned, placement)
    blocks = placement.blocks or []
    print(f"{name:10} arena {placement.arena_bytes:5d} B"
          + (f"  blocks {blocks}" if blocks else "") + f"  {placement.note}")
assert results["ge-max"][1].arena_bytes == 6656                   # the article's figure 4

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
for name in ("ge-max", "ge"):
    aligned, placement = plan_buffers(buffers, name, alignment=512)
    print(f"{name:10} arena with 512-byte alignment: {placement.arena_bytes} B")
    assert placement.arena_bytes == results[name][1].arena_bytes

# %% [markdown]
# ## 4. The same planners on a ResNet
#
# A training step of a small ResNet (`minigraph.models`); its summary's first line says how big.
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
# ## Exercises
#
# **1.** Without running a planner: how many bytes does Binary block reuse need on the
# worked example (alignment 1)? (Hint: which ranges do A, B, C, D, E fall into, which blocks
# can be reused, and what is each block resized to?) Put your number in `ANSWER_1`.
#
# **2.** Make a buffer list of your own (a few `mg.Buffer(id, start, end, size)`) on which
# GE's two-level reuse does *not* reach the theoretical minimum, and put it in `ANSWER_2`.
#
# **3.** Write GE's reuse step yourself (section 2): `my_reuse_blocks(buffers, range_of)`
# returns the blocks, a list of lists of buffer ids, numbered in the order they are
# opened. `range_of(buffer)` gives a buffer's range (Max block: the same for all; level 1:
# the size itself; Binary block: its ceiling). Set `ANSWER_3 = my_reuse_blocks`; the check
# compares it with `reuse_blocks` (`planners/ge.py`) under three range rules.

# %%
ANSWER_1 = None   # a number of bytes
ANSWER_2 = None   # a list of mg.Buffer


def my_reuse_blocks(buffers, range_of):
    """[[buffer id, ...], ...]: GE's blocks, in the order they are opened."""
    raise NotImplementedError      # replace this line


ANSWER_3 = None   # then: ANSWER_3 = my_reuse_blocks

# %%
check_answers({1: (ANSWER_1, l05.exercise_1), 2: (ANSWER_2, l05.exercise_2),
               3: (ANSWER_3, l05.exercise_3)})

# %% [markdown]
# ## Summary
#
# - A block planner walks tensors in schedule order and reuses free blocks; the block
#   *ranges* decide who may share (Max: everyone, Binary: only similar sizes).
# - GE's two-level reuse first merges equal sizes, then nests small blocks inside larger
#   ones whose lives they miss: on the CANN article's example it reaches the theoretical
#   minimum [Huawei GE].
# - Every planner here reaches at best the minimum of its schedule. Next: lesson 05b
#   lowers that minimum by changing the schedule.
