# %% [markdown]
# # 05 · GE's block reuse, and choosing the schedule
#
# **Goal.** Reproduce the Ascend Graph Engine's memory reuse on its own worked example:
# Max block and Binary block reuse, then GE's two-level reuse, which reaches the theoretical
# minimum. Then run the same planners on a ResNet, and lower the minimum itself by changing
# the order the nodes run in (GE's "topo optimisation"), first on the article's own
# examples, then on the zoo's transformer.
#
# **Source.** The CANN article on GE memory reuse [Huawei GE]: section 1 for the block planners,
# section 2 for the schedule. The code is `minigraph/memory/planners/ge.py` and
# `minigraph/memory/topo.py`; read them beside this lesson. GE's level 2 asks greedy-size's
# question, "the lowest offset free for the whole life", of the plain list of placed boxes
# in `planners/greedy.py`; the planner "ge" asks it of a faster index
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
# ## 5. Topo optimisation: lower the minimum itself [Huawei GE, §2]
#
# A planner can at best reach the theoretical minimum *of its schedule*: the CANN article
# says each network has one minimum per topological order, and another order has another.
# `minigraph.memory.ORDERS` holds the orders: BFS, DFS, reverse DFS, GE's adjustment, a
# memory-greedy list scheduler, and "best" (try them all, keep the lowest). First the
# article's own small examples, then two models of the zoo.
#
# ### 5.1 Left branch first or right branch first? (the article's figure 10)
#
# A feeds two branches: B on the left, the chain C -> D -> E on the right; F joins them.
# The article counts steps from 1. Run the left branch first (A B C D E F) and B lives
# from step 2 to 6, beside C and D; run the right branch first (A C D E B F) and B lives
# only 5..6, but A now lives 1..5 instead of 1..3 (the second cell below prints our
# lives and asserts these). The article gives no sizes; we give
# each tensor 8 rows of `cols[X]` float32 columns (a matmul by a parameter sets the width),
# and try two settings: B and D large, or A and D large. `named` gives each node the
# letter of the figure.

# %%
from minigraph.memory import schedule
from minigraph.memory.topo import ge_adjust
from minigraph.models import named


def article_graph(cols, a_is_variable=False, f_reads_a=False, late_reader=False):
    """Figure 10 of [Huawei GE, §2.1]. `a_is_variable`: A is a parameter (figure 11);
    `f_reads_a`: F reads A too; `late_reader`: a node G after F reads A."""
    with mg.name_scope():
        if a_is_variable:
            A = mg.param("A", (8, cols["A"]))       # its own storage, never reused
        else:
            A = named(mg.relu(mg.input("x", (8, cols["A"]))), "A")

        def layer(t, name):
            return named(t @ mg.param("W" + name, (t.shape[1], cols[name])), name)

        B = layer(A, "B")                            # built first: the program runs it first
        E = layer(layer(layer(A, "C"), "D"), "E")
        F = named(mg.concat([E, B, A] if f_reads_a else [E, B], axis=1), "F")
        outputs = [F, named(mg.sum(A), "G")] if late_reader else [F]
        return mg.Graph(outputs, name="figure_10")


def show(label, graph, order):
    """Print an order (a name of ORDERS or a list of nodes), its theoretical minimum in
    exact bytes and every planned tensor's life, counting steps from 1 as the article."""
    sched = schedule(graph, order) if isinstance(order, str) else list(order)
    live = mg.liveness(graph, sched, alignment=1)
    spans = {iv.name: (iv.start + 1, iv.end + 1) for iv in live.planned()}
    print(f"{label:16} {' '.join(sched):14} minimum {live.theoretical_minimum():6d} B   "
          + ", ".join(f"{t} {a}..{b}" for t, (a, b) in sorted(spans.items())))
    return sched, live.theoretical_minimum(), spans


B_LARGE = {"A": 1, "B": 1024, "C": 1, "D": 1024, "E": 1}
A_LARGE = {"A": 1024, "B": 1, "C": 1, "D": 1024, "E": 1}
mg.draw(article_graph(B_LARGE), show_tensors=False)

# %% [markdown]
# `dfs` follows A's first consumer, the left branch B; `rdfs` walks back from F's first
# input E, so it runs the right branch first.

# %%
lower = {}
for label, cols in (("B, D large", B_LARGE), ("A, D large", A_LARGE)):
    g = article_graph(cols)
    print(label)
    left = show("  dfs (left)", g, "dfs")
    right = show("  rdfs (right)", g, "rdfs")
    lower[label] = "left first" if left[1] < right[1] else "right first"
# The article's lives: left first B 2..6 and A 1..3; right first B 5..6 and A 1..5.
assert (left[2]["B"], left[2]["A"], right[2]["B"], right[2]["A"]) == ((2, 6), (1, 3),
                                                                      (5, 6), (1, 5))
print("the lower minimum:", lower)
assert len(set(lower.values())) == 2

# %% [markdown]
# The last line: with B large, right first wins (B no longer lives beside D); with A large,
# left first wins (A no longer lives beside D). A conventional order does not look at
# sizes, so which one a graph gets is luck: the article's "an uncertain result".
#
# ### 5.2 GE's adjustment, fixed rule (figure 11)
#
# GE starts from a conventional order and moves some nodes later, "to just before the
# earliest node that reads its output", only where that cannot raise the memory.
# **Fixed rule:** a node whose inputs are Variables, Consts or inputs (storage that is
# never reused) may move: moving it lengthens no reused life. The article's figure 11:
# A is a Variable, so B moves to just before F. Here A becomes a parameter (no node, so
# steps count from B), and `ge` is `ge_adjust` applied to the program order:

# %%
fig11 = article_graph(B_LARGE, a_is_variable=True)
before = show("program", fig11, "program")
after = show("ge", fig11, "ge")
assert after[0].index("B") == after[0].index("F") - 1
print(f"the adjustment lowers the minimum by {before[1] - after[1]} B "
      f"({before[1]} -> {after[1]})")

# %% [markdown]
# ### 5.3 GE's adjustment, dynamic rule: L1 and L2
#
# When an input of the node is an ordinary (reused) tensor, the article compares two steps:
# **L1**, the end of the longest life among the node's inputs, and **L2**, the first step
# that reads the node's output. If L1 > L2 the input lives past L2 anyway, so the node moves
# to just before L2 for free. Three variants of figure 10 (B and D large), where B's input
# A is an activation:
#
# - as drawn: A's last reader is C;
# - a node G, after F, reads A again;
# - F itself reads A (F = concat of E, B and A): here L1 = L2.
#
# `ge_adjust` moves on L1 = L2 as well: A is read at L2 anyway, so its life does not change.
# `strict=True` applies the article's L1 > L2 as written.

# %%
def l1_l2(graph, sched, node):
    """L1: the last step (from 1) of a planned input of `node`; L2: the first step that
    reads its outputs."""
    step = {n: k + 1 for k, n in enumerate(sched)}
    live = mg.liveness(graph, sched, alignment=1)
    ins = [live.intervals[t] for t in graph.node(node).inputs if live.intervals[t].planned]
    l1 = max(iv.end + 1 for iv in ins)
    l2 = min(step[c] for t in graph.node(node).outputs for c in graph.consumers[t])
    return l1, l2


variants = {"as drawn": {}, "G reads A": {"late_reader": True}, "F reads A": {"f_reads_a": True}}
for label, kw in variants.items():
    g = article_graph(B_LARGE, **kw)
    program = [n.name for n in g.nodes]
    l1, l2 = l1_l2(g, program, "B")
    adjusted = ge_adjust(g, program)
    strict = ge_adjust(g, program, strict=True)
    moved = adjusted.index("B") == adjusted.index("F") - 1
    moved_strict = strict.index("B") == strict.index("F") - 1
    print(f"{label}: L1 = {l1}, L2 = {l2}: B {'moves' if moved else 'stays'} "
          f"(strict L1 > L2: {'moves' if moved_strict else 'stays'})")
    was = show("  program", g, program)
    now = show("  ge_adjust", g, adjusted)
    assert moved == (l1 >= l2) and moved_strict == (l1 > l2)
    assert now[1] <= was[1] and now[2]["A"] == was[2]["A"]    # A's life never grows

# %% [markdown]
# As drawn, moving B would stretch A's life from C's step to F's, so B stays (the first
# block of lines). With a later reader of A, or with F reading A itself, A's life is the
# same before and after, and B's life shrinks to its last steps: compare the two
# minimum columns of each block.
#
# ### 5.4 On the zoo: the transformer and the ResNet
#
# The same orders on two training steps of the zoo, in exact bytes (alignment 1) and
# without in-place, so that only the order changes; each row also plans with GE's
# two-level reuse.

# %%
zoo = {}
for model, graph in (("transformer", get_model("transformer").graph), ("resnet", resnet)):
    zoo[model] = {}
    print(model)
    for order in mg.memory.ORDERS:
        rep = mg.plan_memory(graph, mg.MemoryOptions(planner="ge", order=order, alignment=1))
        zoo[model][order] = rep
        print(f"  {order:8} theoretical minimum {rep.theoretical_minimum:8,d} B   "
              f"GE arena {rep.arena_bytes:8,d} B")
    prog, ge = zoo[model]["program"], zoo[model]["ge"]
    moved = sum(a != b for a, b in zip(prog.plan.schedule, ge.plan.schedule))
    print(f"  GE's adjustment: {moved} of {len(graph.nodes)} nodes run at another step; "
          f"minimum {prog.theoretical_minimum:,} -> {ge.theoretical_minimum:,} B")
lowest = {m: min(t, key=lambda o: t[o].theoretical_minimum) for m, t in zoo.items()}
print("lowest minimum:", lowest)

# %%
fig = Figure(figsize=(11, 3.4), layout="constrained")
for ax, (model, table) in zip(fig.subplots(1, 2), zoo.items()):
    xs = range(len(table))
    ax.bar([x - 0.2 for x in xs], [r.theoretical_minimum / 1024 for r in table.values()],
           width=0.4, label="theoretical minimum")
    ax.bar([x + 0.2 for x in xs], [r.arena_bytes / 1024 for r in table.values()],
           width=0.4, label="GE two-level arena")
    ax.set_xticks(list(xs), list(table))
    ax.set_ylabel("KiB")
    ax.set_title(f"{model}: the order sets the minimum")
fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2)
tf_min = {o: r.theoretical_minimum for o, r in zoo["transformer"].items()}
rn_min = {o: r.theoretical_minimum for o, r in zoo["resnet"].items()}
assert tf_min["ge"] == min(tf_min.values()) < tf_min["program"]
assert rn_min["ge"] == rn_min["program"] > min(rn_min.values())
fig

# %% [markdown]
# On the transformer GE's adjustment gives the lowest minimum of all the orders (the
# "lowest minimum" line). On the ResNet it moves nodes too (its "GE's adjustment" line),
# but the minimum stays where it was: none of the moved outputs was alive at the peak
# step. There another order wins by far. The planner follows: its arena moves with the
# minimum. No order is best everywhere, which is why "best" tries them all.
#
# A schedule changes lives, never results: run the transformer with two plans of other
# orders and compare with the plain run, bit for bit:

# %%
tf = get_model("transformer").graph
feeds = mg.random_feeds(tf)
reference = mg.Executor(tf).run(feeds)
for order in ("ge", "memory"):
    plan = zoo["transformer"][order].plan
    got = mg.Executor(tf, plan).run(feeds)
    print(f"order {order}: same result bit for bit:",
          all(reference[k].tobytes() == got[k].tobytes() for k in reference))

# %% [markdown]
# ## Exercises
#
# **1.** Without running a planner: how many bytes does Binary block reuse need on the
# worked example (alignment 1)? (Hint: which ranges do A, B, C, D, E fall into, which blocks
# can be reused, and what is each block resized to?) Put your number in `ANSWER_1`.
#
# **2.** For the CNN of the zoo (`get_model("cnn").graph`), which order of
# `mg.memory.ORDERS` (other than "best") gives the lowest theoretical minimum, in exact
# bytes (alignment 1) and without in-place? Put its name in `ANSWER_2`.
#
# **3.** Make a buffer list of your own (a few `mg.Buffer(id, start, end, size)`) on which
# GE's two-level reuse does *not* reach the theoretical minimum, and put it in `ANSWER_3`.
#
# **4.** Write GE's reuse step yourself (section 2): `my_reuse_blocks(buffers, range_of)`
# returns the blocks, a list of lists of buffer ids, numbered in the order they are
# opened. `range_of(buffer)` gives a buffer's range (Max block: the same for all; level 1:
# the size itself; Binary block: its ceiling). Set `ANSWER_4 = my_reuse_blocks`; the check
# compares it with `reuse_blocks` (`planners/ge.py`) under three range rules.

# %%
ANSWER_1 = None   # a number of bytes
ANSWER_2 = None   # an order's name
ANSWER_3 = None   # a list of mg.Buffer


def my_reuse_blocks(buffers, range_of):
    """[[buffer id, ...], ...]: GE's blocks, in the order they are opened."""
    raise NotImplementedError      # replace this line


ANSWER_4 = None   # then: ANSWER_4 = my_reuse_blocks

# %%
check_answers({1: (ANSWER_1, l05.exercise_1), 2: (ANSWER_2, l05.exercise_2),
               3: (ANSWER_3, l05.exercise_3), 4: (ANSWER_4, l05.exercise_4)})

# %% [markdown]
# ## Summary
#
# - A block planner walks tensors in schedule order and reuses free blocks; the block
#   *ranges* decide who may share (Max: everyone, Binary: only similar sizes).
# - GE's two-level reuse first merges equal sizes, then nests small blocks inside larger
#   ones whose lives they miss: on the CANN article's example it reaches the theoretical
#   minimum [Huawei GE].
# - The minimum belongs to a schedule. Left or right branch first is luck; GE's adjustment
#   moves a node to just before its first reader when its inputs live on anyway (fixed
#   rule: Variables and Consts; dynamic rule: L1 > L2), so the minimum never rises.
# - No order is best on every graph: try several and keep the lowest ("best").
# - Next: lesson 06 drops blocks altogether and places every tensor at any offset.
